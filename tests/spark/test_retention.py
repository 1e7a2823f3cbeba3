"""A pipeline with `retention_hours` that runs for many hours keeps a bounded footprint: every
hour's decode outputs, offset intervals and hashes, quarantine, reports, table and audit-table
versions, Iceberg metadata and merge tombstones older than the window are pruned, and what is
left still publishes the source's state, finds a replay of an expired hour's offsets, and
refuses a rebuild it can no longer do."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq

from recon.cli import main
from recon.config import load_config
from recon.decode.stats import Stat
from recon.demo import sample
from recon.demo.demo import _comparable, _expected_rows, write_dump
from recon.hours import format_hour
from recon.merge.manifest import bucket_dirs, load_manifest
from recon.ops.expire import expire, hour_output_roots
from recon.ops.run import run_hour
from recon.publish.export import export_rows
from recon.rawdumps import SPARK_KAFKA_DUMP, hour_folder
from tests.support.builders import write_pipeline

H0 = datetime(2026, 11, 20, 0, tzinfo=UTC)
HOURS = 8
KEEP = 2


def _census(wh: Path) -> tuple[int, int]:
    files = [f for f in wh.rglob("*") if f.is_file()]
    return len(files), sum(f.stat().st_size for f in files)


def test_a_long_run_with_retention_keeps_a_bounded_footprint(spark, tmp_path: Path, capsys) -> None:
    hours = [H0 + timedelta(hours=i) for i in range(HOURS)]
    txns = sample.workload(H0, HOURS, txns_per_hour=8, seed=11)
    recs = sample.to_records(sample.ENCODERS["debezium_json"](txns), "t")
    write_dump(tmp_path / "raw", "t", recs, "parquet", hours)
    # the last hour's dump also carries a replay of the first hour's (expired by then)
    first, last = (hour_folder(tmp_path / "raw", "t", h, SPARK_KAFKA_DUMP) for h in (H0, hours[-1]))
    for f in sorted(first.glob("*.parquet")):
        shutil.copy(f, last / f"part-9{f.name.removeprefix('part-')}")
    path = write_pipeline(
        tmp_path / "p.yaml", name="p", format="debezium_json", topics=["t"],
        tables={"shop.orders": {}}, raw=tmp_path / "raw", warehouse=tmp_path / "wh",
        start="2026-11-20T00:00:00Z", retention_hours=KEEP, buckets=2,
    )  # fmt: skip
    cfg = load_config(path)
    sizes = []
    results = []
    for h in hours:
        results.append(run_hour(spark, cfg, h))
        expire(cfg, KEEP)
        sizes.append(_census(cfg.layout.warehouse))
    # the source's state, though most of its history is gone
    got = [_comparable(r) for r in export_rows(cfg, "shop.orders")]
    assert got == _expected_rows(sample.final_state(txns))
    # the replayed records were found read before (their hour's folders are long gone)
    replayed = results[-1]["decode"]["totals"].get(Stat.DUPLICATES_CROSS_HOUR, 0)
    assert replayed == sum(pq.read_metadata(f).num_rows for f in first.glob("*.parquet")) > 0
    assert "offset_gap" not in {f["kind"] for r in results for f in r["audit"]["findings"]}
    # nothing named by an hour before the window's previous hour is left
    before = format_hour(hours[-1] - timedelta(hours=KEEP))
    for root in hour_output_roots(cfg):
        for p in root.iterdir() if root.is_dir() else []:
            assert p.name.removeprefix("hour=").removesuffix(".json") >= before, p
    assert len(list(cfg.layout.offsets_root.iterdir())) == KEEP + 1
    # no tombstone of a delete older than the window in the merge state
    man = load_manifest(cfg)
    dirs = [
        cfg.layout.merge / d for t in man["tables"].values() for f in t["files"].values()
        for d in bucket_dirs(f)
    ]  # fmt: skip
    state = [r for d in dirs for f in d.glob("*.parquet") for r in pq.read_table(f).to_pylist()]
    tombs = [r["event_time_ms"] for r in state if r["sign"] == 0]
    half_ms = (H0 + timedelta(hours=HOURS // 2)).timestamp() * 1000
    assert state and not [t for t in tombs if t < half_ms], tombs
    # the footprint levels off: the last hours add (almost) nothing; unpruned, each added ~30
    (n_mid, b_mid), (n_end, b_end) = sizes[HOURS // 2], sizes[-1]
    assert n_end - n_mid < 15 and b_end < 1.25 * b_mid, sizes
    # a rebuild from the snapshot would need the expired hours: refused, in one line
    assert main(["rebuild", "--pipeline", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no longer has what hours before" in err and "recon rollback" in err
