"""Every cdc-vector file set with an expected state, end to end the way a user runs it: the
messages written as a raw dump, `recon run` (decode, merge, publish to Iceberg) and `recon export`,
compared with the expected rows after the normalisation of test_vectors.

File sets whose expected state is not per source table are not run here: the Paimon sets whose
harness merges several source tables into one (keyed by `_id`, or schema_evolution_1 and _2 into
one), and one flink-cdc set whose source database names carry a random suffix its harness renames
away. Routing tables onto other names is not a pipeline feature; their decoding is checked against
the expected rows in test_vectors.
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pytest
import yaml

from recon.cli import main
from tests.test_vectors import (
    FOLDER_FORMAT,
    WITH_EXPECTED,
    _events,
    _expected_lines,
    _norm,
    _ours,
    load_values,
    sequence_entries,
)


def _routes_tables(entry: dict) -> bool:
    """The upstream harness maps source tables onto other names (or several onto one)."""
    events, _ = _events(entry)
    sources = {f"{e['db']}.{e['tbl']}" for e in events if e["op"] != "ddl"}
    return sources != {x["table"] for x in _expected_lines(entry)}


E2E = [e for e in WITH_EXPECTED if not _routes_tables(e)]

# Open in issue 3 (found by this test, not yet fixed): these reproduce their rows through the
# decode-level fold (test_vectors) but not yet through run + export. strict: a fix turns them red.
OPEN = {
    "flink__canal-data-filter-table.txt": "mydb.project's varchar key column exports as NULL",
    "tibigdata__ticdc-canal-json.json": "a column of the all-types table renders differently",
    "tibigdata__ticdc-canal-packet.bin": "a column of the all-types table renders differently",
    "tibigdata__ticdc-canal-packet.b64": "a column of the all-types table renders differently",
    "flink-cdc__debezium-data-schema-exclude.json": "a column of full_types renders differently",
    "flink-cdc__debezium-data-schema-exclude-with-numeric-decimal.json": (
        "a column of full_types renders differently"
    ),
    "paimon__debezium-schemaevolution-3.txt": "rows after the schema change differ",
}


def _param(e: dict) -> Any:
    name = Path(e["file"]).name
    marks = (
        [pytest.mark.xfail(strict=True, reason=f"issue 3 open: {OPEN[name]}")]
        if name in OPEN
        else []
    )
    return pytest.param(e, id=name, marks=marks)


def _num(v: Any) -> Any:
    """Numbers compare as numbers: a DOUBLE's 1.0 is the source's 1, DECIMAL 1.100000 is 1.1."""
    if isinstance(v, str):
        try:
            d = Decimal(v)
        except InvalidOperation:
            return v
        return ("NUM", d.normalize()) if d.is_finite() else v
    return v


def _canonical(v: Any) -> Any:
    """An exported JSON value back to canonical text (recon.values) for comparison."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


@pytest.mark.parametrize("entry", [_param(e) for e in E2E])
def test_recon_run_and_export_reproduce_the_expected_state(
    spark, tmp_path: Path, entry: dict
) -> None:
    fmt = FOLDER_FORMAT[entry["file"].split("/")[0]]
    expected_lines = _expected_lines(entry)
    tables = sorted({x["table"] for x in expected_lines})
    values: list[bytes | None] = []
    for e in sequence_entries(entry):
        values.extend(load_values(e))
        if "inject a Kafka record with value=null AFTER this file" in (e.get("note") or ""):
            values.append(None)
    topic = f"vectors.{tables[0]}" if len(tables) == 1 else "vectors"
    folder = tmp_path / "raw" / topic / "dt=2026-01-01" / "hour=00"
    folder.mkdir(parents=True)
    with (folder / "part-00000.jsonl").open("w") as f:
        for i, v in enumerate(values):
            rec = {
                "key": None,
                "value": None if v is None else base64.b64encode(v).decode(),
                "topic": topic,
                "partition": 0,
                "offset": i,
                "timestamp": 1_767_225_600_000 + i,
            }
            f.write(json.dumps(rec) + "\n")
    (folder / "_SUCCESS").write_text("")
    # where a message states no key, the upstream test's table gives it: the first column
    first_col = {x["table"]: next(iter(x["row"])) for x in expected_lines}
    events, _ = _events(entry)
    keyed = {f"{e['db']}.{e['tbl']}" for e in events if e["pk"]}
    cfg = {
        "name": "vectors",
        "format": fmt,
        "raw_path": str(tmp_path / "raw"),
        "topics": [topic],
        "warehouse": str(tmp_path / "wh"),
        "start": "2026-01-01T00:00:00Z",
        "tables": {t: {} if t in keyed else {"primary_key": [first_col[t]]} for t in tables},
    }
    cfg_file = tmp_path / "vectors.yaml"
    cfg_file.write_text(yaml.safe_dump(cfg))
    assert main(["run", "--pipeline", str(cfg_file), "--from", "2026-01-01T00"]) == 0
    manifest = json.loads(
        (tmp_path / "wh" / "_state" / "vectors" / "merge" / "manifest.json").read_text()
    )
    for table in tables:
        out = tmp_path / f"{table}.jsonl"
        assert (
            main(["export", "--pipeline", str(cfg_file), "--table", table, "--out", str(out)]) == 0
        )
        got_rows = [json.loads(x) for x in out.read_text().splitlines()]
        t_types = dict(manifest["tables"][table]["schema"]["columns"])
        exp_rows = [x["row"] for x in expected_lines if x["table"] == table]
        cols = list(exp_rows[0].keys())
        exp = sorted(
            (
                tuple(_num(_norm(r.get(c), t_types.get(c, "unknown"), fmt)) for c in cols)
                for r in exp_rows
            ),
            key=repr,
        )
        shape = tuple(_norm(exp_rows[0].get(c), t_types.get(c, "unknown"), fmt) for c in cols)
        ours = sorted(
            (
                tuple(
                    _num(_ours(_canonical(r.get(c)), e)) for c, e in zip(cols, shape, strict=True)
                )
                for r in got_rows
            ),
            key=repr,
        )
        assert ours == exp, f"{table}: exported rows differ from {entry['expected']}"


def test_the_end_to_end_vector_set_is_not_empty() -> None:
    assert len(E2E) >= 30
