"""Real messages from other projects' test suites (copied into tests/data/cdc-vectors, with their sources): these bytes become
these rows. Each file is decoded, folded with the reference merge rules, and compared with the
expected table state after the normalisation below (expected files keep each source's own value
encoding; ours is the canonical text of recon.core.values)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recon.core.model import RawRecord
from recon.decode.stream import decode_records
from recon.demo.reference_fold import fold, table_rows
from tests.conftest import VECTORS
from tests.support.vectors import (
    FOLDER_FORMAT,
    INDEX,
    WITH_EXPECTED,
    as_ours,
    decoded_events,
    expected_table_lines,
    normalized,
)


@pytest.mark.parametrize("entry", WITH_EXPECTED, ids=[Path(e["file"]).name for e in WITH_EXPECTED])
def test_vector_decodes_to_expected_rows(entry: dict) -> None:
    fmt = FOLDER_FORMAT[entry["file"].split("/")[0]]
    events, _ = decoded_events(entry)
    expected_lines = expected_table_lines(entry)
    single = "SINGLE-TABLE" in entry["expected_status"]
    only = {x["table"] for x in expected_lines}
    if single:  # Paimon merges three source tables into one keyed by _id
        for ev in events:
            ev["db"], ev["tbl"], ev["pk"] = "<single-table: topic>", "", ["_id"]
    elif len(only) == 1:
        # upstream harnesses name the table themselves (flink-cdc's source.db carries a random
        # suffix): one expected table means every event of the file belongs to it
        name = next(iter(only))
        first_col = next(iter(expected_lines[0]["row"]))
        for ev in events:
            ev["db"], ev["tbl"] = name.split(".", 1)
            ev["pk"] = ev["pk"] or [first_col]

    def table_of(ev: dict) -> str:
        return ev["db"] if single else f"{ev['db']}.{ev['tbl']}"

    types: dict[str, dict[str, str]] = {}
    for ev in events:
        for c, lt in ev["types"]:
            types.setdefault(table_of(ev), {})[c] = lt
    got = table_rows(fold(events, table_of=table_of))
    for table in only:
        exp_rows = [x["row"] for x in expected_lines if x["table"] == table]
        cols = list(exp_rows[0].keys())
        t_types = types.get(table, {})
        exp = sorted(
            (
                tuple(normalized(r.get(c), t_types.get(c, "unknown"), fmt) for c in cols)
                for r in exp_rows
            ),
            key=repr,
        )
        # the expected value shape per column (decimal bytes or not), from the first expected row
        shape = tuple(normalized(exp_rows[0].get(c), t_types.get(c, "unknown"), fmt) for c in cols)
        ours = sorted(
            (
                tuple(as_ours(r.get(c), e) for c, e in zip(cols, shape, strict=True))
                for r in got.get(table, [])
            ),
            key=repr,
        )
        assert ours == exp, f"{table}: decoded rows differ from {entry['expected']}"


def test_every_vector_with_an_expected_state_is_covered() -> None:
    if not INDEX:
        pytest.fail(f"cdc vectors not found at {VECTORS}")
    covered = {e["file"] for e in WITH_EXPECTED}
    skipped = [e["file"] for e in INDEX if e.get("expected") and e["file"] not in covered]
    # maxwell is a bonus format none of the six pipelines formats read
    assert all(f.startswith("maxwell-json/") for f in skipped), skipped


def test_tdsql_doc_examples_decode_with_ddl_from_the_stream() -> None:
    lines = (
        (VECTORS / "tdsql-binlog-json/qcloud-docs__tdsql-examples.DERIVED.jsonl")
        .read_bytes()
        .splitlines()
    )
    msgs = [json.loads(x) for x in lines]
    by_kind = {m["eventtypestr"]: m for m in msgs}
    # replay in transaction order: DDL, then gtid / insert / xid of the test table
    insert = dict(by_kind["insert"], db="testsummer", table="test_table1")
    stream = [
        by_kind["query"],
        by_kind["gtid"] | {"db": "testsummer", "table": "test_table1"},
        insert,
        by_kind["xid"],
    ]
    recs = [RawRecord("t", 0, i, None, json.dumps(m).encode(), 0) for i, m in enumerate(stream)]
    out = decode_records(recs, "tdsql_json").to_pylist()
    events = [r for r in out if r["kind"] == "event"]
    assert [e["op"] for e in events] == ["ddl", "insert"]
    assert dict(events[1]["after"]) == {"id": "1", "name": "name1"}
    assert events[1]["pk"] == ["id"]
    assert dict(events[1]["types"]) == {"id": "int32", "name": "string"}


def test_tdsql_without_column_names_is_quarantined_with_the_fix() -> None:
    line = (
        (VECTORS / "tdsql-binlog-json/qcloud-docs__tdsql-examples.DERIVED.jsonl")
        .read_bytes()
        .splitlines()[0]
    )
    out = decode_records([RawRecord("t", 0, 0, None, line, 0)], "tdsql_json").to_pylist()
    q = [r for r in out if r["kind"] == "quarantine"]
    assert len(q) == 1 and q[0]["raw_value"] == line
    assert "testdb.testtable" in q[0]["reason"] and "columns:" in q[0]["reason"]


def test_dtle_schema_change_becomes_a_ddl_event() -> None:
    raw = json.dumps(
        json.loads((VECTORS / "debezium-json/dtle-docs__schema-change-ddl.json").read_text())
    ).encode()
    out = decode_records(
        [RawRecord("dtle.schema", 0, 0, b"null", raw, 0)], "debezium_json"
    ).to_pylist()
    ev = [r for r in out if r["kind"] == "event"]
    assert len(ev) == 1 and ev[0]["op"] == "ddl" and ev[0]["tbl"] == "a"
    assert ev[0]["ddl"].startswith("CREATE TABLE `a`")
