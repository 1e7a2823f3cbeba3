"""Merging a subset of tables, rebuilding the merge state from the snapshot and every decoded
hour since the start (the `tables` and `rebuild_from_snapshot` params of the DAGs), and rolling
back to an hour (`recon rollback`)."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recon.audit.stage import audit_hour
from recon.cli import main
from recon.config import PipelineConfig, load_config
from recon.errors import ReconError
from recon.hours import format_hour
from recon.jobs.stage import main as stage_main
from recon.merge.manifest import load_manifest, reset_state
from recon.merge.stage import merge_hour
from recon.publish.export import export_rows
from recon.publish.iceberg import load_table
from tests.support.builders import edit_pipeline, pipeline
from tests.support.merge import H0, UUID, T, event, hour, write_hour

TABLES = {"s.a": {"primary_key": ["id"]}, "s.b": {"primary_key": ["id"]}}


def _hours(cfg: PipelineConfig) -> None:
    """Three hours of changes to s.a and s.b, GTIDs 1..18; the snapshot holds GTIDs 1-2."""
    n = 0
    for i in range(3):
        evs = []
        for t in ("s.a", "s.b"):
            for k in range(3):
                n += 1
                key = i * 10 + k
                evs.append(
                    event(n, t, "insert", None, {"id": key, "v": f"{t}{n}"}, T, gtid=f"{UUID}:{n}")
                )
        write_hour(cfg, hour(i), evs)
        counters = cfg.layout.decode_counters(hour(i))  # what decode counted
        counters.write_text(
            json.dumps({**json.loads(counters.read_text()), "events_by_op": {"insert": 6}})
        )


def _snapshot(folder: Path) -> dict[str, Any]:
    for t in ("s.a", "s.b"):
        (folder / t).mkdir(parents=True)
        pq.write_table(
            pa.Table.from_pylist([{"id": 100, "v": f"snap {t}"}, {"id": 0, "v": "ignored"}]),
            folder / t / "part-0.parquet",
        )
    (folder / "_watermark.json").write_text(json.dumps({"gtid_set": f"{UUID}:1-2"}))
    return {"path": str(folder)}


def _rows(cfg: PipelineConfig, table: str) -> list[dict[str, Any]]:
    return list(export_rows(cfg, table))


def test_a_run_limited_to_some_tables_merges_them_and_reports_the_rest(spark, tmp_path) -> None:
    cfg = pipeline(tmp_path / "part", TABLES)
    full = pipeline(tmp_path / "full", TABLES)
    _hours(cfg)
    _hours(full)
    with pytest.raises(ReconError, match=r"table s\.zz is not in pipeline t; choose from s\.a"):
        merge_hour(spark, cfg, hour(0), tables=["s.zz"])
    r = merge_hour(spark, cfg, hour(0), buckets=4, tables=["s.a"])
    assert list(r["tables"]) == ["s.a"] and r["not_merged"] == {"s.b": 3}
    assert load_manifest(cfg)["tables"].keys() == {"s.a"}
    report = audit_hour(spark, cfg, hour(0))
    assert report["identity"]["events"]["not_merged"] == {"s.b": 3}
    assert report["identity"]["events"]["balanced"]  # the changes not merged are accounted for
    kinds = {(f["kind"], f.get("table")) for f in report["findings"]}
    assert ("not_merged", "s.b") in kinds and report["verdict"] == "warn"
    # the other table later, then the remaining hours: the same tables as merging all at once
    r = merge_hour(spark, cfg, hour(0), buckets=4, tables=["s.b"])
    assert list(r["tables"]) == ["s.a", "s.b"] and r["not_merged"] == {}
    assert not [f for f in audit_hour(spark, cfg, hour(0))["findings"] if f["kind"] == "not_merged"]
    for i in (1, 2):
        merge_hour(spark, cfg, hour(i), buckets=4)
    for i in range(3):
        merge_hour(spark, full, hour(i), buckets=4)
    for t in ("s.a", "s.b"):
        assert _rows(cfg, t) == _rows(full, t) and len(_rows(cfg, t)) == 9


def test_an_hour_merged_for_some_tables_is_missing_for_the_others(spark, tmp_path) -> None:
    """A manual run limited to s.a merges hour 0 for it alone: hour 1's merge of every table
    reports hour 0 as missing (s.b's published version lacks its changes) and its audit says
    so; once s.b has hour 0 too, hour 1 merged again reports nothing missing."""
    cfg = pipeline(tmp_path / "part", TABLES)
    _hours(cfg)
    merge_hour(spark, cfg, hour(0), buckets=4, tables=["s.a"])
    assert load_manifest(cfg)["partial_hours"] == {format_hour(hour(0)): ["s.a"]}
    r = merge_hour(spark, cfg, hour(1), buckets=4)
    assert r["hours_missing_before"] == [format_hour(hour(0))]
    order = [f for f in audit_hour(spark, cfg, hour(1))["findings"] if f["kind"] == "hour_order"]
    assert len(order) == 1 and format_hour(hour(0)) in order[0]["message"]
    # only s.a merged again for hour 1: hour 0 is merged for s.a, so nothing is missing for it
    assert merge_hour(spark, cfg, hour(1), buckets=4, tables=["s.a"])["hours_missing_before"] == []
    merge_hour(spark, cfg, hour(0), buckets=4, tables=["s.b"])
    assert load_manifest(cfg)["partial_hours"] == {}
    assert merge_hour(spark, cfg, hour(1), buckets=4)["hours_missing_before"] == []
    assert not [f for f in audit_hour(spark, cfg, hour(1))["findings"] if f["kind"] == "hour_order"]


def test_rebuild_brings_a_table_added_later_up_to_date_from_the_snapshot(spark, tmp_path) -> None:
    snap = _snapshot(tmp_path / "snap")
    cfg = pipeline(tmp_path / "p", {"s.a": TABLES["s.a"]}, snapshot=snap)
    _hours(cfg)
    for i in range(3):
        merge_hour(spark, cfg, hour(i), buckets=4)
    a_before = _rows(cfg, "s.a")
    # s.b joins the config: its state starts now, from the snapshot, but its earlier hours are
    # not in it until a rebuild
    assert cfg.source_file is not None
    edit_pipeline(cfg.source_file, tables={"s.a": TABLES["s.a"], "s.b": TABLES["s.b"]})
    cfg = load_config(cfg.source_file)
    merge_hour(spark, cfg, hour(2), buckets=4)
    a_snapshots = len(load_table(cfg, "s.a").snapshots())
    stale_b = _rows(cfg, "s.b")  # the snapshot's two rows + hour 2's inserts, hours 0-1 missing
    assert len(stale_b) == 2 + 3 and {"id": 0, "v": "ignored"} in stale_b
    reference = pipeline(tmp_path / "ref", TABLES, snapshot=snap)
    _hours(reference)
    for i in range(3):
        merge_hour(spark, reference, hour(i), buckets=4)
    expected_b = _rows(reference, "s.b")
    # GTIDs 1-2 are in the snapshot (s.a's first two inserts); s.b: snapshot + its nine inserts,
    # the insert of id 0 (GTID 4) replacing the snapshot's row
    assert len(expected_b) == 1 + 9 and {"id": 100, "v": "snap s.b"} in expected_b
    assert {"id": 0, "v": "s.b4"} in expected_b
    b_before = {s.snapshot_id for s in load_table(cfg, "s.b").snapshots()}
    assert main(["rebuild", "--pipeline", str(cfg.source_file), "--tables", "s.b"]) == 0
    assert _rows(cfg, "s.b") == expected_b
    # one version, of the last hour: readers never saw s.b go back to the snapshot and forward
    new = [s for s in load_table(cfg, "s.b").snapshots() if s.snapshot_id not in b_before]
    assert [s.summary.additional_properties["recon.hour"] for s in new] == [format_hour(hour(2))]
    assert load_manifest(cfg)["tables"]["s.b"]["snapshot_id"] == new[0].snapshot_id
    assert _rows(cfg, "s.a") == a_before  # untouched: only s.b was rebuilt
    assert len(load_table(cfg, "s.a").snapshots()) == a_snapshots
    # every table, through the DAG's stage entry point (rebuild covers the run's own hour)
    rc = stage_main(
        ["merge", "--pipeline", str(cfg.source_file), "--from", format_hour(hour(2)),
         "--rebuild", "true", "--run-id", "manual__rb"]
    )  # fmt: skip
    assert rc == 0
    man = load_manifest(cfg)
    assert man["hours"] == [format_hour(hour(i)) for i in range(3)]
    assert {f["run_id"] for t in man["tables"].values() for f in t["files"].values()} <= {
        f"manual__rb_{format_hour(hour(i))}" for i in range(3)
    }
    assert _rows(cfg, "s.a") == _rows(reference, "s.a") == a_before
    assert _rows(cfg, "s.b") == expected_b
    # the published table was replaced as a whole, once; the earlier versions stay in its history
    assert len(load_table(cfg, "s.a").snapshots()) == a_snapshots + 1


def test_rebuild_of_a_missing_hour_or_unknown_table_says_so(spark, tmp_path, capsys) -> None:
    cfg = pipeline(tmp_path / "p", TABLES)
    _hours(cfg)
    shutil.rmtree(tmp_path / "p" / "wh" / "_state" / "t" / "decode")
    rc = stage_main(
        ["merge", "--pipeline", str(cfg.source_file), "--from", format_hour(hour(1)),
         "--rebuild", "true"]
    )  # fmt: skip
    assert rc == 2 and "hour 2026-01-01T01 is not decoded" in capsys.readouterr().err
    assert main(["rebuild", "--pipeline", str(cfg.source_file), "--tables", "s.a,x.y"]) == 2
    assert "table x.y is not in pipeline t" in capsys.readouterr().err


def test_rollback_restores_the_tables_and_the_state_of_an_hour(spark, tmp_path, capsys) -> None:
    cfg = pipeline(tmp_path / "p", TABLES)
    _hours(cfg)
    for i in range(3):
        merge_hour(spark, cfg, hour(i), buckets=4)
    after_1 = {t: list(export_rows(cfg, t, hour=format_hour(hour(1)))) for t in TABLES}
    after_2 = {t: _rows(cfg, t) for t in TABLES}
    assert all(len(after_1[t]) == 6 and len(after_2[t]) == 9 for t in TABLES)
    undone = load_table(cfg, "s.a").current_snapshot().snapshot_id
    assert main(["rollback", "--pipeline", str(cfg.source_file), "--to-hour", "2026-01-01T01"]) == 0
    assert (
        "hours 2026-01-01T02 .. 2026-01-01T02 are no longer in the tables"
        in capsys.readouterr().out
    )
    assert {t: _rows(cfg, t) for t in TABLES} == after_1
    assert load_manifest(cfg)["hours"] == [format_hour(hour(0)), format_hour(hour(1))]
    # the undone version stays readable, and the rollback is a commit of its own
    assert list(export_rows(cfg, "s.a", snapshot_id=undone)) == after_2["s.a"]
    props = load_table(cfg, "s.a").current_snapshot().summary.additional_properties
    assert props["recon.rollback-of"] == str(undone)
    # the state went back too: hour 2 applies again in full (not "already applied")
    again = merge_hour(spark, cfg, hour(2), buckets=4)["tables"]["s.a"]
    assert (again["applied"], again["skipped"]["already_applied"]) == (3, 0)
    assert {t: _rows(cfg, t) for t in TABLES} == after_2
    # an hour with no saved state: one line pointing at rebuild
    assert main(["rollback", "--pipeline", str(cfg.source_file), "--to-hour", "2025-12-31T23"]) == 2
    assert "recon rebuild --to 2025-12-31T23" in capsys.readouterr().err


def test_an_earlier_hour_merged_again_leaves_its_tag_on_its_own_version(
    spark, tmp_path: Path
) -> None:
    """Issue 79 item 9: merging hour 0 again after hour 2 (late data, a cleared run) publishes
    what the newest hour now holds; it moved tag `hour-...T00` onto that content, so a reader
    time-travelling to hour 0 by its tag saw hour 2's rows. The new version is hour 2's now
    (its tag moves), and hour 0's tag stays on hour 0's version."""
    t = {"id": "int32", "v": "string"}
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}})
    evs = {i: [event(i, "s.a", "insert", None, {"id": i, "v": f"h{i}"}, t)] for i in range(3)}
    for i in range(3):
        write_hour(cfg, H0 + timedelta(hours=i), evs[i])
        merge_hour(spark, cfg, H0 + timedelta(hours=i), buckets=2)
    table = load_table(cfg, "s.a")
    tags = {n: r.snapshot_id for n, r in table.refs().items() if n.startswith("hour-")}
    late = [*evs[0], event(9, "s.a", "insert", None, {"id": 9, "v": "late"}, t)]
    write_hour(cfg, H0, late)
    merge_hour(spark, cfg, H0, buckets=2)
    table = load_table(cfg, "s.a")
    now = {n: r.snapshot_id for n, r in table.refs().items() if n.startswith("hour-")}
    h0, h2 = f"hour-{format_hour(H0)}", f"hour-{format_hour(H0 + timedelta(hours=2))}"
    assert now[h0] == tags[h0]  # hour 0's own version, as rollback and --as-of-hour read it
    assert now[h2] == table.current_snapshot().snapshot_id != tags[h2]
    rows = table.scan(snapshot_id=now[h0]).to_arrow().column("id").to_pylist()
    assert sorted(rows) == [0]
    assert sorted(r["id"] for r in export_rows(cfg, "s.a")) == [0, 1, 2, 9]


def test_a_rebuild_killed_part_way_publishes_nothing_and_the_next_merge_publishes_it_whole(
    spark, tmp_path
) -> None:
    snap = _snapshot(tmp_path / "snap")
    cfg = pipeline(tmp_path / "p", TABLES, snapshot=snap)
    reference = pipeline(tmp_path / "ref", TABLES, snapshot=snap)
    for c in (cfg, reference):
        _hours(c)
    for i in range(3):
        merge_hour(spark, reference, hour(i), buckets=4)
    for i in range(2):  # hours 0-1, published in two buckets (the rebuild makes four)
        merge_hour(spark, cfg, hour(i), buckets=2, tables=["s.a"])
    before = {s.snapshot_id for s in load_table(cfg, "s.a").snapshots()}
    shown = _rows(cfg, "s.a")
    # what a rebuild killed after merging hours 0 and 1 leaves: state merged, nothing published
    reset_state(cfg, ["s.a"])
    for i in range(2):
        merge_hour(spark, cfg, hour(i), buckets=4, tables=["s.a"], publish=False)
    assert {s.snapshot_id for s in load_table(cfg, "s.a").snapshots()} == before
    assert _rows(cfg, "s.a") == shown
    assert "snapshot_id" not in load_manifest(cfg)["tables"]["s.a"]
    # hour 2 touches a few buckets, and publishes the whole state, not those buckets' rows only
    merge_hour(spark, cfg, hour(2), buckets=4, tables=["s.a"])
    assert _rows(cfg, "s.a") == _rows(reference, "s.a")
