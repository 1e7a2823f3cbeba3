"""Crash safety (issue 3): a real `recon merge` process killed (SIGKILL) during the merge,
between writing data files and the Iceberg commit, and between the commit and the state manifest,
leaves the published table readable at a complete version; re-running the hour converges to the
result of an uninterrupted run."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from recon.faults import POINTS
from recon.merge.manifest import load_manifest
from recon.merge.stage import merge_hour
from recon.publish.export import export_rows
from recon.publish.iceberg import load_table
from tests.support.builders import pipeline
from tests.support.crash import kill_at
from tests.support.merge import H0, HOUR0, HOUR1, UUID, T, event, hour, write_hour


def test_a_killed_merge_leaves_a_readable_table_and_a_rerun_converges(
    spark, tmp_path: Path
) -> None:
    # the uninterrupted result, in its own warehouse
    ref = pipeline(tmp_path / "ref", {"s.a": {"primary_key": ["id"]}})
    write_hour(ref, H0, HOUR0)
    write_hour(ref, hour(1), HOUR1)
    merge_hour(spark, ref, H0, buckets=4)
    merge_hour(spark, ref, hour(1), buckets=4)
    expected = list(export_rows(ref, "s.a"))
    assert {"id": 3, "v": "changed"} in expected and len(expected) == 29

    cfg = pipeline(tmp_path / "run", {"s.a": {"primary_key": ["id"]}})
    write_hour(cfg, H0, HOUR0)
    write_hour(cfg, hour(1), HOUR1)
    merge_hour(spark, cfg, H0, buckets=4)
    hour0 = list(export_rows(cfg, "s.a"))
    assert cfg.source_file is not None
    for point in POINTS:
        kill_at(cfg.source_file, point, tmp_path)
        rows = list(export_rows(cfg, "s.a"))
        if point == "merge:published":  # committed, manifest not yet replaced
            assert rows == expected, point
        else:
            assert rows == hour0, point
        assert load_manifest(cfg)["hours"] == ["2026-01-01T00"], point
    merge_hour(spark, cfg, hour(1), buckets=4)
    assert list(export_rows(cfg, "s.a")) == expected
    assert load_manifest(cfg)["hours"] == ["2026-01-01T00", "2026-01-01T01"]
    # every committed version is complete: the hour-0 version is still the hour-0 rows
    assert list(export_rows(cfg, "s.a", hour="2026-01-01T00")) == hour0
    assert len(load_table(cfg, "s.a").snapshots()) >= 3


def test_a_retried_merge_with_the_same_run_id_commits_only_its_own_files(
    spark, tmp_path: Path
) -> None:
    """Airflow's retry and clear re-use the run id. The hour that loads the snapshot writes
    every bucket; its retry (the snapshot now loaded) writes one. The retry used to write into
    the same folder: killed between its write and its commit, the version in force had lost
    files; finished, it committed the first attempt's files a second time (doubled rows)."""
    snap = tmp_path / "snap"
    (snap / "s.a").mkdir(parents=True)
    rows = [{"id": i, "v": f"snap{i}"} for i in range(40)]
    pq.write_table(pa.Table.from_pylist(rows), snap / "s.a" / "part-0.parquet")
    (snap / "_watermark.json").write_text(json.dumps({"gtid_set": f"{UUID}:1-40"}))
    cfg = pipeline(tmp_path / "p", {"s.a": {"primary_key": ["id"]}}, snapshot={"path": str(snap)})
    write_hour(
        cfg, H0, [event(1, "s.a", "insert", None, {"id": 100, "v": "new"}, T, gtid=f"{UUID}:41")]
    )
    first = merge_hour(spark, cfg, H0, run_id="manual__1", buckets=8)
    assert first["tables"]["s.a"]["buckets_touched"] == 8
    expected = list(export_rows(cfg, "s.a"))
    assert len(expected) == 41
    assert cfg.source_file is not None
    kill_at(cfg.source_file, "publish:files-written", tmp_path, "2026-01-01T00", "manual__1")
    assert list(export_rows(cfg, "s.a")) == expected  # the version in force is whole
    again = merge_hour(spark, cfg, H0, run_id="manual__1", buckets=8)
    assert again["tables"]["s.a"]["buckets_touched"] == 1
    assert list(export_rows(cfg, "s.a")) == expected
    assert load_table(cfg, "s.a").scan().to_arrow().num_rows == 41
