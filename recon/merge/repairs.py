"""Corrections read from the live source (`recon reconcile --repair`), kept as contributions of
the hour whose version they correct: every merge of that hour (the repair's own, a re-run, a
rebuild) folds them in with the hour's events, so the state and the table keep them.

A repaired key's contribution sorts right after what the state held for it when it was
repaired: its order key is the state winner's followed by one zero byte (a pipeline's order
keys share one fixed-length layout, so every later change of the stream still sorts after it;
a key the state never held gets the single zero byte, below every change). A row the source
has is an image (`sign` 1), a row it lacks a tombstone (`sign` 0); both have op `repair`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recon.config import PipelineConfig
from recon.merge.contributions import REPAIR_OP, STATE_COLS, STATE_DDL, key_bucket
from recon.merge.manifest import Manifest, bucket_dirs
from recon.merge.snapshot import event_image

KINDS = ("missing", "extra", "different")
"""The differences a repair corrects (not those in flight: the stream changes them later)."""
REPAIR_DDL = (
    "table string, key string, ident binary, order_key binary, sign int, "
    "row map<string,string>, event_time_ms bigint, op string, kind string, "
    "before map<string,string>, after map<string,string>"
)
"""A repair file's rows: the contributions, with the difference each corrects (`kind`) and the
row before and after it as `recon reconcile` compared them (its canonical text)."""
CONTRIBUTION_COLS = [c for c in STATE_COLS if c not in ("bucket", "ck")]


def repair_dirs(cfg: PipelineConfig, hour: str) -> list[Path]:
    """The repairs made to the version of `hour`, oldest first (one folder per repair)."""
    root = cfg.layout.repairs_root / f"hour={hour}"
    return sorted(d for d in root.glob("repair=*") if d.is_dir()) if root.is_dir() else []


def drop_repairs_after(cfg: PipelineConfig, hour: str) -> list[str]:
    """Remove the repairs of the versions of hours after `hour` (`recon rollback`: those
    versions are undone; compare and repair again once the hours are merged again)."""
    root = cfg.layout.repairs_root
    gone = sorted(d for d in root.glob("hour=*") if d.name.removeprefix("hour=") > hour)
    for d in gone:
        shutil.rmtree(d)
    return [d.name.removeprefix("hour=") for d in gone]


def repair_rows(
    spark: SparkSession, cfg: PipelineConfig, hour: str, names: list[str]
) -> DataFrame | None:
    """The contributions the repairs of `hour` make to tables `names` (None: no repair)."""
    dirs = repair_dirs(cfg, hour)
    if not dirs:
        return None
    rows = spark.read.schema(REPAIR_DDL).parquet(*[str(d) for d in dirs])
    return rows.where(F.col("table").isin(names)).select(*CONTRIBUTION_COLS)


def planned_repairs(
    spark: SparkSession,
    man: Manifest,
    cfg: PipelineConfig,
    name: str,
    diffs: DataFrame,
    logical: dict[str, str],
    pk: list[str],
    read_ms: int,
) -> DataFrame:
    """The repair rows (`REPAIR_DDL`) of table `name` from `recon reconcile`'s differences
    (`recon.audit.reconcile.Comparison.diffs`), the source's rows read at `read_ms`."""
    d = diffs.where(F.col("kind").isin(*KINDS))
    source, table = _image(d, "styped", logical), _image(d, "ttyped", logical)
    live = F.col("kind") != "extra"
    image = F.when(live, source).otherwise(table)
    keyed = d.select(
        "kind",
        F.to_json(F.array(*[image[c] for c in pk])).alias("key"),
        F.when(live, source).alias("row"),
        F.col("trow").alias("before"),
        F.col("srow").alias("after"),
    )
    held = _state_order_keys(spark, man, cfg, name, keyed)
    ok = F.concat(F.coalesce(F.col("_ok"), F.lit(bytearray()).cast("binary")), F.unhex(F.lit("00")))
    return keyed.join(held, "key", "left").select(
        F.lit(name).alias("table"),
        "key",
        ok.alias("ident"),
        ok.alias("order_key"),
        F.when(live, 1).otherwise(0).alias("sign"),
        "row",
        F.lit(read_ms).cast("bigint").alias("event_time_ms"),
        F.lit(REPAIR_OP).alias("op"),
        "kind",
        "before",
        "after",
    )


def _image(diffs: DataFrame, side: str, logical: dict[str, str]) -> Column:
    """One side's typed row (`styped`: the source's, `ttyped`: the table's) as an event's image."""
    fields = diffs.schema[side].dataType.fields  # type: ignore[attr-defined]
    return event_image([(f.name, F.col(side)[f.name], f.dataType) for f in fields], logical)


def _state_order_keys(
    spark: SparkSession, man: Manifest, cfg: PipelineConfig, name: str, keys: DataFrame
) -> DataFrame:
    """Per key of table `name`'s state, the highest order key it holds (`_ok`), live or not,
    read from the buckets of `keys` only."""
    entry = man["tables"].get(name)
    if entry is None:
        return spark.createDataFrame([], "key string, _ok binary")
    bucket = key_bucket({name: int(entry["buckets"])})
    wanted = keys.select(F.lit(name).alias("table"), "key").select(bucket.alias("b")).distinct()
    files = entry["files"]
    ours = [files[str(r["b"])] for r in wanted.collect() if str(r["b"]) in files]
    dirs = [str(cfg.layout.merge / d) for f in ours for d in bucket_dirs(f)]
    if not dirs:
        return spark.createDataFrame([], "key string, _ok binary")
    state = spark.read.schema(STATE_DDL).parquet(*dirs).where(F.col("table") == name)
    return state.groupBy("key").agg(F.max("order_key").alias("_ok"))
