"""Probe: what one hour would cost in a merge-on-read layout, beside today's copy-on-write merge.

The state target (an hour of 1M changes into 20M state rows at most 1.5x the hour into 1M) is
not met by the copy-on-write merge: random keys reach every bucket, so the hour rewrites the
whole state and the whole published table. This probe times, on `merge_cost`'s tables, the
steps a merge-on-read hour would run (none of them is the product's yet), and then the
product's `merge_hour` of the same hour:

1. the hour's contributions and their counts (the product's own steps);
2. the hour's winners folded alone, written as a delta of the state (the changed keys only);
3. the changed keys' old winners, looked up in a narrow scan of the state (key, order key,
   sign, checksum term) by an inner join with the broadcast delta, and per bucket what the
   statistics need (stale, already applied, live rows and checksum terms gained and lost);
4. the delta's live rows as published data files;
5. the published rows they replace, by a narrow scan of the table's data files (the key and
   Spark's `_metadata` row index): the rows of an Iceberg position-delete file.

Steps 2-5 run twice in one JVM (the second warm), then `merge_hour` once. The probe's outputs
are written under the work folder and left out of the table; compaction is not timed.

Run: .venv/bin/python -m benchmarks.mor_probe --rows 1000000 --changes 1000000
(numbers, not a pass/fail test; docs/performance.md quotes a run).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.merge_cost import H0, _hour, _jvm_peak_mb
from recon.config import PipelineConfig, load_config
from recon.merge.contributions import STATE_DDL
from recon.merge.manifest import load_manifest
from recon.merge.stage import _HourMerge, merge_hour
from recon.merge.state import checksum_sums, fold
from recon.publish.iceberg import _typed_rows, column_exprs, load_table
from recon.spark.session import get_spark

BUCKETS = 16
TABLE = "b.t"


def build(spark: SparkSession, base: Path, rows: int, changes: int) -> PipelineConfig:
    """A table of `rows` keys merged as hour 0, and hour 1's `changes` updates decoded."""
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True, exist_ok=True)
    doc = {
        "name": "bench", "format": "debezium_json", "raw_path": str(base / "raw"),
        "topics": ["bench"], "warehouse": str(base / "wh"), "start": H0.isoformat(),
        "tables": {TABLE: {"primary_key": ["id"]}}, "buckets": BUCKETS,
    }  # fmt: skip
    (base / "bench.yaml").write_text(yaml.safe_dump(doc))
    cfg = load_config(base / "bench.yaml")
    _hour(cfg, H0, 0, np.arange(rows, dtype=np.int64), "v", "insert")
    merge_hour(spark, cfg, H0, buckets=BUCKETS)
    keys = np.random.default_rng(1).choice(rows, size=min(changes, rows), replace=False)
    _hour(cfg, H0 + timedelta(hours=1), rows, keys.astype(np.int64), "w", "update")
    return cfg


class Laps:
    def __init__(self) -> None:
        self.t0 = self.t = time.perf_counter()
        self.laps: dict[str, float] = {}

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self.t, 2)
        self.t = now

    def total(self) -> dict[str, float]:
        return {**self.laps, "total": round(time.perf_counter() - self.t0, 2)}


def contributions(spark: SparkSession, cfg: PipelineConfig) -> _HourMerge:
    m = _HourMerge(spark, cfg, H0 + timedelta(hours=1), "probe", [TABLE], BUCKETS)
    m.man = load_manifest(cfg)
    m.read_events()
    m.resolve_schemas()
    m.build_contributions()
    m.find_touched_buckets()
    m.set_aside_unfit()
    return m


def lookup_stats(m: _HourMerge, delta: DataFrame) -> list[Any]:
    """Per bucket, from the changed keys' old winners: what the statistics' update needs."""
    base = m.cfg.layout.merge
    dirs = [str(base / f["path"]) for f in m.man["tables"][TABLE]["files"].values()]
    old = (
        m.spark.read.schema(STATE_DDL)
        .parquet(*dirs)
        .select(
            "table",
            "bucket",
            "key",
            F.col("order_key").alias("o_ok"),
            F.col("sign").alias("o_sign"),
            F.col("ck").alias("o_ck"),
        )  # fmt: skip
    )
    # inner: Spark cannot broadcast the preserved side of an outer join (a left join of the
    # delta shuffled the 20M state rows: 23 s against 8 s); keys new to the state have no row
    new = F.broadcast(delta.select("table", "bucket", "key", "order_key", "sign", "ck"))
    wins = F.struct("order_key", "sign") > F.struct("o_ok", "o_sign")
    lost: list[Column] = [
        c.alias(f"lost{i}")
        for i, c in enumerate(
            checksum_sums(F.when(wins & (F.col("o_sign") == 1), F.col("o_ck")).otherwise(0))
        )
    ]
    live_change = (F.col("sign") == 1).cast("int") - (F.col("o_sign") == 1).cast("int")
    return (
        new.join(old, ["table", "bucket", "key"], "inner")
        .groupBy("table", "bucket")
        .agg(
            F.sum(F.when(F.col("order_key") < F.col("o_ok"), 1).otherwise(0)).alias("stale"),
            F.sum(F.when(F.col("order_key") == F.col("o_ok"), 1).otherwise(0)).alias("again"),
            F.sum(F.when(wins, live_change)).alias("d_rows"),
            *lost,
        )
        .collect()
    )


def mor_hour(spark: SparkSession, cfg: PipelineConfig, out: Path) -> dict[str, float]:
    lap = Laps()
    m = contributions(spark, cfg)
    lap("contributions and counts")
    columns = {n: [c for c, _ in m.schemas[n].columns] for n in m.names}
    winners = fold(spark.createDataFrame([], STATE_DDL), m.to_fold, [], columns)
    winners.write.mode("overwrite").parquet(str(out / "delta"))
    delta = spark.read.schema(STATE_DDL).parquet(str(out / "delta"))
    lap("the hour's winners, as a delta")
    lookup_stats(m, delta)
    lap("old winners looked up, statistics")
    s = m.schemas[TABLE]
    typed = _typed_rows(delta.where(F.col("sign") == 1), s, column_exprs(s, {}))
    typed.write.mode("overwrite").parquet(str(out / "published"))
    lap("the delta's rows published")
    files = [t.file.file_path for t in load_table(cfg, TABLE).scan().plan_files()]
    where = spark.read.parquet(*files).select(
        "id", F.col("_metadata.file_path").alias("file_path"), F.col("_metadata.row_index")
    )
    ids = F.broadcast(typed.select("id"))
    where.join(ids, "id", "left_semi").drop("id").write.mode("overwrite").parquet(
        str(out / "position-deletes")
    )
    lap("the replaced rows' positions")
    return lap.total()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--work", default="var/mor-probe", help="folder for the table")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    base = Path(args.work).resolve() / str(args.rows)
    spark = get_spark("recon-mor-probe")
    cfg = build(spark, base, args.rows, args.changes)
    result: dict[str, Any] = {"rows": args.rows, "changes": args.changes}
    for i in range(2):
        result[f"merge_on_read_{i + 1}"] = mor_hour(spark, cfg, base / "probe")
        print(json.dumps({f"merge-on-read, round {i + 1}": result[f"merge_on_read_{i + 1}"]}))
    t0 = time.perf_counter()
    merge_hour(spark, cfg, H0 + timedelta(hours=1), buckets=BUCKETS)
    result["copy_on_write_s"] = round(time.perf_counter() - t0, 2)
    result["jvm_peak_mb"] = _jvm_peak_mb()
    print(json.dumps({"copy-on-write merge_hour": result["copy_on_write_s"]}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
