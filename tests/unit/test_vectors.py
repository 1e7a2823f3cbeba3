"""Real messages from other projects' test suites (copied into tests/data/cdc-vectors, with their sources): these bytes become
these rows. Each file is decoded, folded with the reference merge rules, and compared with the
expected table state after the normalisation below (expected files keep each source's own value
encoding; ours is the canonical text of recon.core.values)."""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from recon.core.model import RawRecord
from recon.decode.base import DecodeContext
from recon.decode.stream import decode_records
from recon.demo.reference_fold import fold, table_rows
from tests.conftest import VECTORS

INDEX = json.loads((VECTORS / "index.json").read_text()) if VECTORS.is_dir() else []
FOLDER_FORMAT = {
    "canal-json": "canal_json",
    "canal-protobuf": "canal_pb",
    "debezium-json": "debezium_json",
    "dataworks-json": "dataworks_json",
}


def _json_lines(text: str) -> list[bytes]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            json.loads(line)
        except ValueError:
            continue  # Paimon files start with a license comment
        out.append(line.encode())
    return out


def load_values(entry: dict) -> list[bytes | None]:
    path = VECTORS / entry["file"]
    pre = entry["preprocess"]
    if path.suffix == ".bin":
        return [path.read_bytes()]
    if path.suffix == ".b64":
        return [base64.b64decode(path.read_text().strip())]
    text = path.read_text(encoding="utf-8")
    if pre.startswith("one pretty JSON object; feed .expected_snapshot then .expected_binlog"):
        d = json.loads(text)
        return [
            json.dumps(d["expected_snapshot"]).encode(),
            json.dumps(d["expected_binlog"]).encode(),
        ]
    if pre.startswith("one pretty JSON object") or pre.startswith("whole file is one JSON"):
        return [json.dumps(json.loads(text)).encode()]
    values: list[bytes | None] = list(_json_lines(text))
    return values


def sequence_entries(entry: dict) -> list[dict]:
    """Files 1..N of a multi-file sequence, in order (expected states are cumulative)."""
    return sorted(
        (e for e in INDEX if e["sequence"] == entry["sequence"] and e["order"] <= entry["order"]),
        key=lambda e: e["order"],
    )


def _expected_lines(entry: dict) -> list[dict]:
    text = (VECTORS / entry["expected"]).read_text()
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def _events(entry: dict, primary_keys: bool = True) -> tuple[list[dict], dict]:
    fmt = FOLDER_FORMAT[entry["file"].split("/")[0]]
    # Where a message states no key (no Kafka key, no pkNames), the upstream test's table
    # definition gives it: the pipeline's `primary_key:`. Here: the expected file's first column.
    pks = (
        {x["table"]: [next(iter(x["row"]))] for x in _expected_lines(entry)} if primary_keys else {}
    )
    values: list[bytes | None] = []
    for e in sequence_entries(entry):
        values.extend(load_values(e))
        if "inject a Kafka record with value=null AFTER this file" in (e.get("note") or ""):
            values.append(None)
    tables = {x["table"] for x in _expected_lines(entry)}
    # messages that name no table take it from a Debezium-style topic name (contract 2.3)
    topic = f"vectors.{next(iter(tables))}" if len(tables) == 1 else "vectors"
    recs = [RawRecord(topic, 0, i, None, v, 0) for i, v in enumerate(values)]
    out = decode_records(recs, fmt, DecodeContext(primary_keys=pks)).to_pylist()
    stats = {r["stat"]: r["n"] for r in out if r["kind"] == "stat"}
    assert not [r for r in out if r["kind"] == "quarantine"], [
        r["reason"] for r in out if r["kind"] == "quarantine"
    ]
    return [r for r in out if r["kind"] == "event"], stats


# -- the oracle: expected (source encoding) -> canonical text, given our logical type --------------
def _norm(v: object, lt: str, fmt: str) -> object:
    if v is None:
        return None
    if isinstance(v, dict) and "wkb" in v:
        return v["wkb"]
    if isinstance(v, bool):
        return "true" if v else "false"
    if lt == "binary":
        if fmt in ("canal_json", "canal_pb") and isinstance(v, str):
            return base64.b64encode(v.encode("latin-1")).decode()
        return v
    if lt.startswith("decimal") and isinstance(v, str) and not re.fullmatch(r"-?\d+(\.\d+)?", v):
        return ("DECIMAL-BYTES", int.from_bytes(base64.b64decode(v), "big", signed=True))
    if lt == "date" and isinstance(v, int):
        return (date(1970, 1, 1) + timedelta(days=v)).isoformat()
    if lt == "datetime" and isinstance(v, int):
        us = v * 1000 if v < 10**14 else v  # ms (DATETIME(0-3)) or us (DATETIME(4-6))
        dt = datetime(1970, 1, 1) + timedelta(microseconds=us)
        return dt.strftime("%Y-%m-%d %H:%M:%S") + (
            f".{dt.microsecond:06d}" if dt.microsecond else ""
        )
    if lt == "timestamp" and isinstance(v, int):
        dt = datetime.fromtimestamp(v / 1000, UTC)
        return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    if (
        lt == "timestamp"
        and isinstance(v, str)
        and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", v)
    ):
        return v.replace(" ", "T") + "Z"  # Canal's zone-less TIMESTAMP text is read as UTC
    if lt == "time" and isinstance(v, int):
        s, us = divmod(v, 1_000_000)
        return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}" + (f".{us:06d}" if us else "")
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _ours(v: object, expected: object) -> object:
    if isinstance(expected, tuple) and expected[0] == "DECIMAL-BYTES" and isinstance(v, str):
        return ("DECIMAL-BYTES", int(v.replace(".", "")))
    return v


WITH_EXPECTED = [e for e in INDEX if e.get("expected") and e["file"].split("/")[0] in FOLDER_FORMAT]


@pytest.mark.parametrize("entry", WITH_EXPECTED, ids=[Path(e["file"]).name for e in WITH_EXPECTED])
def test_vector_decodes_to_expected_rows(entry: dict) -> None:
    fmt = FOLDER_FORMAT[entry["file"].split("/")[0]]
    events, _ = _events(entry)
    expected_lines = _expected_lines(entry)
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
                tuple(_norm(r.get(c), t_types.get(c, "unknown"), fmt) for c in cols)
                for r in exp_rows
            ),
            key=repr,
        )
        # the expected value shape per column (decimal bytes or not), from the first expected row
        shape = tuple(_norm(exp_rows[0].get(c), t_types.get(c, "unknown"), fmt) for c in cols)
        ours = sorted(
            (
                tuple(_ours(r.get(c), e) for c, e in zip(cols, shape, strict=True))
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
