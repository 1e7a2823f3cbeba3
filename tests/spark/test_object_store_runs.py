"""A pipeline whose raw dumps, snapshot and Iceberg tables are on S3 (a real S3 protocol server:
moto's, on 127.0.0.1) publishes what the same pipeline on local paths publishes, hour by hour,
through `recon run`, a rollback and an expire; merged on read (position deletes on S3), and
with a merge killed between uploading its files and committing them, it converges as on local
paths. A bucket that does not exist stops a run with one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from recon.cli import main
from recon.config import PipelineConfig, load_config
from recon.demo.demo import make_demo_data
from recon.merge.stage import merge_hour
from recon.ops.expire import expire_hour_outputs
from recon.publish.export import export_rows
from recon.publish.iceberg import load_table
from tests.support.builders import pipeline, write_pipeline
from tests.support.crash import kill_at
from tests.support.merge import delete_files, hour, mor_hours, write_hour
from tests.support.s3 import make_bucket, moto_server, objects, upload, use_s3

FMT = "debezium_json"
TOPIC = f"demo_{FMT}"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


def _rows(cfg: PipelineConfig, name: str, at: str | None = None) -> list[dict[str, Any]]:
    return list(export_rows(cfg, name, hour=at, with_metadata=True))


def _run(*args: str) -> int:
    return main([*args])


def _results(cfg: PipelineConfig) -> list[dict[str, Any]]:
    """What each merged hour said of its tables, but the Iceberg commit's own ids."""
    out = []
    for f in sorted((cfg.layout.merge / "hours").glob("hour=*.json")):
        tables = json.loads(f.read_text())["tables"]
        out.append({n: {k: v for k, v in t.items() if k != "published"} for n, t in tables.items()})
    return out


def test_a_pipeline_on_s3_publishes_what_it_publishes_on_local_paths(
    spark: SparkSession, tmp_path: Path, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_s3(monkeypatch, endpoint)
    lake = make_bucket("lake-run")
    demo = tmp_path / "demo"
    facts = make_demo_data(demo, 3)
    upload(demo / "raw" / TOPIC, f"{lake}/raw/{TOPIC}")
    upload(demo / "snapshot", f"{lake}/snapshot")
    common: dict[str, Any] = {
        "name": "p", "format": FMT, "topics": [TOPIC], "tables": {"shop.orders": {}},
        "start": "2026-11-20T00:00:00Z", "buckets": 2, "audit": {"fail_on": ["offset_gap"]},
    }  # fmt: skip
    local = write_pipeline(
        tmp_path / "local" / "p.yaml", raw=demo / "raw", warehouse=tmp_path / "local" / "wh",
        snapshot={"path": str(demo / "snapshot")}, **common,
    )  # fmt: skip
    on_s3 = write_pipeline(
        tmp_path / "s3" / "p.yaml", raw=f"{lake}/raw", warehouse=tmp_path / "s3" / "wh",
        snapshot={"path": f"{lake}/snapshot"}, catalog={"warehouse": f"{lake}/ice"}, **common,
    )  # fmt: skip
    first, last = (h.strftime("%Y-%m-%dT%H") for h in (facts["hours"][0], facts["hours"][-1]))
    for p in (local, on_s3):
        assert _run("validate", "--check-access", str(p)) == 0
        assert _run("run", "--pipeline", str(p), "--from", first, "--to", last) == 0
    a, b = load_config(local), load_config(on_s3)
    assert b.raw_uri and b.snapshot_uri  # read from the bucket, not from the demo's folders
    assert _results(a) == _results(b) and len(_results(b)) == 3
    assert _rows(b, "shop.orders") == _rows(a, "shop.orders")
    assert len(_rows(b, "shop.orders")) == facts["rows_at_end"]
    table = load_table(b, "shop.orders")
    assert table.location().startswith(f"{lake}/ice/")
    data = [u for u in objects(f"{lake}/ice") if "/data/" in u and u.endswith(".parquet")]
    snap = table.current_snapshot()
    assert snap is not None
    live = {t.file.file_path for t in table.scan().plan_files()}
    assert live and live <= set(data)  # the version in force reads objects on S3 only

    # a rollback and an expire do on S3 what they do on local paths
    middle = facts["hours"][1].strftime("%Y-%m-%dT%H")
    for p in (local, on_s3):
        assert _run("rollback", "--pipeline", str(p), "--to-hour", middle) == 0
    assert _rows(b, "shop.orders") == _rows(a, "shop.orders") == _rows(a, "shop.orders", middle)
    before = objects(f"{lake}/ice")
    for p in (local, on_s3):
        assert _run("expire", "--pipeline", str(p), "--keep-hours", "1") == 0
    after = objects(f"{lake}/ice")
    gone = set(before) - set(after)  # expired files left the bucket: hour 0's data among them
    assert any("/data/" in u and "hour=2026-11-20T00" in u for u in gone)
    assert _rows(b, "shop.orders") == _rows(a, "shop.orders")
    # the dumps' copies in the warehouse go with their hours' outputs
    copies = {h: b.raw_path / TOPIC / f"dt=2026-11-20/hour={h}" for h in ("00", "01", "02")}
    assert all(c.is_dir() for c in copies.values())
    expire_hour_outputs(b, "2026-11-20T02")
    assert [h for h, c in copies.items() if c.is_dir()] == ["02"]
    kept = load_table(b, "shop.orders")
    for s in kept.snapshots():  # every version kept still reads: none of its files was deleted
        assert {t.file.file_path for t in kept.scan(snapshot_id=s.snapshot_id).plan_files()} <= set(
            after
        )


def test_merged_on_read_on_s3_with_a_killed_merge_converges_as_on_local_paths(
    spark: SparkSession, tmp_path: Path, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_s3(monkeypatch, endpoint)
    lake = make_bucket("lake-mor")
    tables = {"s.a": {"primary_key": ["id"]}, "s.b": {}}
    local = pipeline(tmp_path / "local", tables, write_mode="merge-on-read")
    on_s3 = pipeline(
        tmp_path / "s3", tables, write_mode="merge-on-read", catalog={"warehouse": f"{lake}/ice"}
    )
    for i, evs in enumerate(mor_hours()):
        for c in (local, on_s3):
            write_hour(c, hour(i), evs)
    for i in range(2):
        for c in (local, on_s3):
            merge_hour(spark, c, hour(i), buckets=4)
    assert delete_files(on_s3) > 0  # hour 1 was merged on read: its position deletes on S3
    deletes = [u for u in objects(f"{lake}/ice") if "/_del/" in u]
    assert deletes
    # killed after its files went up, before the commit that names them: a rerun converges
    assert on_s3.source_file is not None
    kill_at(on_s3.source_file, "publish:files-written", tmp_path, hour="2026-01-01T02")
    assert _rows(on_s3, "s.a") == _rows(local, "s.a")  # the hour-1 version still in force
    for i in (2, 3):
        for c in (local, on_s3):
            merge_hour(spark, c, hour(i), buckets=4)
    for name in ("s.a", "s.b"):
        assert _rows(on_s3, name) == _rows(local, name), name
        for i in range(4):
            at = hour(i).strftime("%Y-%m-%dT%H")
            assert _rows(on_s3, name, at) == _rows(local, name, at), (name, at)


def test_a_run_from_a_bucket_that_does_not_exist_stops_in_one_line(
    spark: SparkSession,
    tmp_path: Path,
    endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_s3(monkeypatch, endpoint)
    p = write_pipeline(
        tmp_path / "p.yaml", name="p", format=FMT, raw="s3://no-such-lake/raw",
        warehouse=tmp_path / "wh", topics=["t"],
    )  # fmt: skip
    capsys.readouterr()
    rc = _run("run", "--pipeline", str(p), "--from", "2026-11-20T00", "--to", "2026-11-20T00")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[-1].endswith("bucket no-such-lake does not exist; create it or fix the path")
    assert not any("Traceback" in line for line in err)
    assert not (tmp_path / "wh" / "_s3" / "no-such-lake").exists()  # no silent local folder
