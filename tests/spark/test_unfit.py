"""A change whose value does not fit its column is set aside, never published as NULL: the key
keeps its previous version, the change is quarantined with its record's bytes and a reason, and
the hour's verdict follows `fail_on` (issue 12, item 8)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.dataset as ds

from recon.audit.stage import audit_hour
from recon.config import PipelineConfig, load_config
from recon.core.model import RawRecord
from recon.decode.stage import decode_hour
from recon.demo.demo import write_dump
from recon.layout import read_json
from recon.merge.result import MergeResult
from recon.merge.stage import merge_hour
from recon.publish.export import export_rows
from tests.support.builders import write_pipeline

H0 = datetime(2026, 3, 1, 0, tzinfo=UTC)
HOURS = [H0, H0 + timedelta(hours=1)]
DDL = "CREATE TABLE s.a (id INT PRIMARY KEY, n INT, d DATE)"


def _dbz(op: str, before: dict | None, after: dict | None, tbl: str = "a") -> bytes:
    src = {"db": "s", "table": tbl}
    return json.dumps({"before": before, "after": after, "source": src, "op": op}).encode()


def _decode_and_merge(
    spark, tmp_path: Path, values: list[tuple[int, bytes]], tables: dict
) -> tuple[PipelineConfig, MergeResult]:
    """Debezium `values` (Kafka time, value) decoded and merged hour by hour: the config and
    the last hour's merge report."""
    recs = [RawRecord("t", 0, i, None, v, ts) for i, (ts, v) in enumerate(values)]
    write_dump(tmp_path / "raw", "t", recs, "parquet", HOURS, files_per_hour=1)
    cfg = load_config(
        write_pipeline(
            tmp_path / "p.yaml",
            name="p",
            format="debezium_json",
            topics=["t"],
            raw=tmp_path / "raw",
            warehouse=tmp_path / "wh",
            start="2026-03-01T00:00:00Z",
            tables=tables,
        )
    )
    for h in HOURS:
        decode_hour(spark, cfg, h)
        r = merge_hour(spark, cfg, h, buckets=4)
    return cfg, r


def test_an_unfit_value_is_quarantined_and_the_key_keeps_its_previous_version(
    spark, tmp_path: Path
) -> None:
    t0 = int(H0.timestamp() * 1000)
    t1 = t0 + 3_600_000
    values = [
        (t0, _dbz("c", None, {"id": 1, "n": 5, "d": "2026-01-01"})),
        (t0 + 1, _dbz("c", None, {"id": 4, "n": 1, "d": "0000-00-00"})),  # a zero date: NULL
        (t1, _dbz("u", {"id": 1, "n": 5}, {"id": 1, "n": "five", "d": "2026-01-01"})),
        (t1 + 1, _dbz("c", None, {"id": 2, "n": "x", "d": "someday"})),
        (t1 + 2, _dbz("c", None, {"id": 3, "n": 7, "d": "2026-01-02"})),
    ]
    cfg, r = _decode_and_merge(spark, tmp_path, values, {"s.a": {"ddl": DDL}})
    t = r["tables"]["s.a"]
    # values of no class that fits (`five`, `someday`; a zero date too): the events are checked
    first = read_json(cfg.layout.merge_result(HOURS[0]))["tables"]["s.a"]
    assert first["checked_in_decode"] is False and t["checked_in_decode"] is False
    assert t["skipped"]["uncastable"] == 2 and t["uncastable_columns"] == {"n": 2, "d": 1}
    assert "uncastable" not in t["published"] or not t["published"]["uncastable"]
    rows = {row["id"]: (row["n"], row["d"]) for row in export_rows(cfg, "s.a")}
    assert rows == {1: (5, "2026-01-01"), 3: (7, "2026-01-02"), 4: (1, None)}

    q = ds.dataset(str(cfg.layout.merge_quarantine(HOURS[1])), format="parquet").to_table()
    cols = [q[c].to_pylist() for c in ("offset", "reason", "raw_value")]
    got = sorted(zip(*cols, strict=True))
    assert [(o, v) for o, _, v in got] == [(2, values[2][1]), (3, values[3][1])]
    assert got[1][1] == (
        "value does not fit its column: n = 'x' (not int32), d = 'someday' (not date)"
    )

    report = audit_hour(spark, cfg, HOURS[1])
    assert report["verdict"] == "fail" and report["identity"]["balanced"]
    kinds = [(f["kind"], f.get("table")) for f in report["findings"] if f["severity"] == "fail"]
    assert ("quarantined", "s.a") in kinds
    samples = report["decoding"]["quarantine_samples"]["value does not fit its column"]
    assert {x["offset"] for x in samples} == {2, 3} and all(x["value_base64"] for x in samples)

    # the same hour again gives the same table and the same quarantine (not twice)
    merge_hour(spark, cfg, HOURS[1], buckets=4)
    again = ds.dataset(str(cfg.layout.merge_quarantine(HOURS[1])), format="parquet").to_table()
    assert again.num_rows == 2
    assert {row["id"] for row in export_rows(cfg, "s.a")} == {1, 3, 4}


def test_changes_set_aside_are_counted_once_each_for_keyless_tables_and_key_changes(
    spark, tmp_path: Path
) -> None:
    """The set-aside changes are counted from the merge's contributions: an update of a table
    without a key makes two (a copy removed, a copy added) and a primary-key change two (the new
    image, the old key's tombstone), yet each is one change set aside; what fits still merges."""

    t0 = int(H0.timestamp() * 1000)
    t1 = t0 + 3_600_000
    values = [
        (t0, _dbz("c", None, {"id": 1, "n": 5, "d": "2026-01-01"}, "a")),
        (t0 + 1, _dbz("c", None, {"k": "x", "m": 1}, "b")),
        (t0 + 2, _dbz("c", None, {"k": "y", "m": 2}, "b")),
        (t1, _dbz("u", {"id": 1, "n": 5}, {"id": 9, "n": "nine", "d": "2026-01-01"}, "a")),
        (t1 + 1, _dbz("u", {"k": "x", "m": 1}, {"k": "x", "m": "one"}, "b")),
        (t1 + 2, _dbz("u", {"k": "y", "m": 2}, {"k": "y", "m": 3}, "b")),
        (t1 + 3, _dbz("c", None, {"k": "z", "m": "zed"}, "b")),
    ]
    tables = {"s.a": {"ddl": DDL}, "s.b": {"ddl": "CREATE TABLE s.b (k VARCHAR(5), m INT)"}}
    cfg, r = _decode_and_merge(spark, tmp_path, values, tables)
    a, b = r["tables"]["s.a"], r["tables"]["s.b"]
    assert (a["skipped"]["uncastable"], a["uncastable_columns"]) == (1, {"n": 1})
    assert (b["skipped"]["uncastable"], b["uncastable_columns"]) == (2, {"m": 2})
    assert a["entered_by_op"] == {} and a["pk_changes"] == 0
    assert b["entered_by_op"] == {"update": 1} and b["applied"] == 1
    assert {row["id"]: row["n"] for row in export_rows(cfg, "s.a")} == {1: 5}
    assert sorted((row["k"], row["m"]) for row in export_rows(cfg, "s.b")) == [("x", 1), ("y", 3)]
