"""The `decode` stage of one pipeline-hour: raw dumps -> canonical events, quarantine, carry.

Writes (under the pipeline's warehouse; contract 4):
- `_state/<pipeline>/events/hour=H/`      canonical events of the hour (Parquet)
- `_state/<pipeline>/carry/hour=H/`       raw records carried to hour H+1 (open segments,
                                          transactions, unpaired update halves)
- `_state/<pipeline>/offsets/hour=H/`     offset intervals seen in H, for cross-hour dedupe
- `_state/<pipeline>/schema/hour=H.json`  table definitions after H (for formats without names)
- `_state/<pipeline>/decode/hour=H.json`  counters; written last, so its presence means done
- `quarantine/<pipeline>/hour=H/`          records that could not be decoded: bytes + reason

Every output of an hour is replaced as a whole, so re-running an hour converges.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recon.config import PipelineConfig
from recon.core.model import OUTPUT_SCHEMA
from recon.core.sqlddl import TableDef, apply_alter_table, parse_create_table
from recon.decode.base import DecodeContext
from recon.decode.dumps import check_complete, list_hour, read_hour
from recon.hours import format_hour

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class StatePaths:
    root: Path
    pipeline: str

    @property
    def base(self) -> Path:
        return self.root / "_state" / self.pipeline

    def events(self, hour: datetime) -> Path:
        return self.base / "events" / f"hour={format_hour(hour)}"

    def carry(self, hour: datetime) -> Path:
        return self.base / "carry" / f"hour={format_hour(hour)}"

    def offsets_root(self) -> Path:
        return self.base / "offsets"

    def offsets(self, hour: datetime) -> Path:
        return self.offsets_root() / f"hour={format_hour(hour)}"

    def schema(self, hour: datetime) -> Path:
        return self.base / "schema" / f"hour={format_hour(hour)}.json"

    def counters(self, hour: datetime) -> Path:
        return self.base / "decode" / f"hour={format_hour(hour)}.json"

    def quarantine(self, hour: datetime) -> Path:
        return self.root / "quarantine" / self.pipeline / f"hour={format_hour(hour)}"

    def staging(self, run_id: str) -> Path:
        return self.base / "_staging" / run_id


def spark_ddl(schema: Any) -> str:
    """Arrow schema -> Spark DDL for mapInArrow."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return str(from_arrow_schema(schema).simpleString())[len("struct<") : -1]


def table_defs_before(
    cfg: PipelineConfig, paths: StatePaths, hour: datetime
) -> dict[str, TableDef]:
    """Table definitions in force at the start of `hour`: config, then the previous hour's state."""
    defs: dict[str, TableDef] = {}
    for name, t in cfg.tables.items():
        tdef = t.table_def()
        if tdef is not None:
            defs[name] = tdef
    prev = paths.schema(hour - timedelta(hours=1))
    if prev.is_file():
        for name, d in json.loads(prev.read_text())["tables"].items():
            defs[name] = TableDef.from_json(d)
    return defs


def fold_ddl(defs: dict[str, TableDef], ddls: list[tuple[str, str, str]]) -> dict[str, TableDef]:
    """Apply the hour's DDL (db, table, sql), in order, to the table definitions."""
    out = dict(defs)
    for db, _tbl, sql in ddls:
        try:
            cdb, ctbl, tdef = parse_create_table(sql)
            out[f"{cdb or db}.{ctbl}"] = tdef
            continue
        except ValueError:
            pass
        res = apply_alter_table(sql, TableDef())
        if res is None:
            continue
        key = f"{res[0] or db}.{res[1]}"
        if key in out:
            altered = apply_alter_table(sql, out[key])
            if altered is not None:
                out[key] = altered[2]
    return out


def _replace_dir(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.exists():
        src.rename(dst)
    else:
        dst.mkdir(parents=True)


def _earlier_offset_dirs(paths: StatePaths, hour: datetime) -> list[str]:
    root = paths.offsets_root()
    if not root.is_dir():
        return []
    mine = f"hour={format_hour(hour)}"
    return sorted(
        str(p)
        for p in root.iterdir()
        if p.is_dir() and p.name.startswith("hour=") and p.name < mine and any(p.glob("*.parquet"))
    )


def decode_hour(
    spark: SparkSession,
    cfg: PipelineConfig,
    hour: datetime,
    run_id: str | None = None,
    allow_incomplete: bool = False,
) -> dict[str, Any]:
    """Run the decode stage for one hour; returns the counters it also writes."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    run_id = run_id or uuid.uuid4().hex[:12]
    paths = StatePaths(cfg.warehouse, cfg.name)
    files = [list_hour(cfg.raw_path, t, hour) for t in cfg.topics]
    check_complete(files, hour, allow_incomplete)
    records, unreadable = read_hour(spark, files)
    records = records.persist(StorageLevel.MEMORY_AND_DISK)

    # input counters per (topic, partition): aggregates only, never the data
    input_stats = {
        (r["topic"], r["partition"]): r.asDict()
        for r in records.groupBy("topic", "partition")
        .agg(
            F.count("*").alias("records"),
            F.countDistinct("offset").alias("distinct"),
            F.sum(F.coalesce(F.length("value"), F.lit(0))).alias("bytes"),
            F.min("offset").alias("min_offset"),
            F.max("offset").alias("max_offset"),
        )
        .collect()
    }

    distinct = records.dropDuplicates(["topic", "partition", "offset"])
    earlier = _earlier_offset_dirs(paths, hour)
    if earlier:
        iv = spark.read.parquet(*earlier).select("topic", "partition", "lo", "hi")
        cond = (
            (distinct["topic"] == iv["topic"])
            & (distinct["partition"] == iv["partition"])
            & distinct["offset"].between(iv["lo"], iv["hi"])
        )
        seen = distinct.join(F.broadcast(iv), cond, "left_semi")
        cross_dups = {
            (r["topic"], r["partition"]): r["n"]
            for r in seen.groupBy("topic", "partition").agg(F.count("*").alias("n")).collect()
        }
        fresh = distinct.join(F.broadcast(iv), cond, "left_anti")
    else:
        cross_dups = {}
        fresh = distinct

    prev_hour = hour - timedelta(hours=1)
    carry_dir = paths.carry(prev_hour)
    carried_in_available = carry_dir.is_dir() and any(carry_dir.glob("*.parquet"))
    to_decode = fresh
    if carried_in_available:
        carried = spark.read.parquet(str(carry_dir)).select(
            "topic",
            "partition",
            "offset",
            F.col("raw_key").alias("key"),
            F.col("raw_value").alias("value"),
            F.col("raw_ts_ms").alias("ts_ms"),
            F.col("raw_headers").alias("headers"),
            F.lit(True).alias("carried"),
            "skip",
        )
        to_decode = to_decode.unionByName(carried)

    ctx = DecodeContext(
        tables=table_defs_before(cfg, paths, hour),
        primary_keys={n: list(t.primary_key) for n, t in cfg.tables.items() if t.primary_key},
    )
    fmt = cfg.format

    def decode_partition(batches):
        from recon.decode.stream import decode_stream

        yield from decode_stream(batches, fmt, ctx)

    n_parts = max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 8))
    decoded = (
        to_decode.repartition(n_parts, "topic", "partition")
        .sortWithinPartitions("topic", "partition", "offset")
        .mapInArrow(decode_partition, spark_ddl(OUTPUT_SCHEMA))
    )

    staging = paths.staging(run_id)
    if staging.exists():
        shutil.rmtree(staging)
    decoded.write.partitionBy("kind").parquet(str(staging))
    n_unreadable = unreadable.count()
    if n_unreadable:
        out_cols = [f.name for f in OUTPUT_SCHEMA]
        bad = unreadable.select(
            F.lit("quarantine").alias("kind"),
            "topic",
            F.lit(-1).alias("partition"),
            F.lit(-1).cast("long").alias("offset"),
            F.concat(F.lit("unreadable dump line in "), F.col("file")).alias("reason"),
            F.encode("line", "UTF-8").alias("raw_value"),
        )
        for f in OUTPUT_SCHEMA:
            if f.name not in bad.columns:
                bad = bad.withColumn(f.name, F.lit(None).cast(decoded.schema[f.name].dataType))
        bad.select(*out_cols).write.mode("append").partitionBy("kind").parquet(str(staging))

    def part(kind: str) -> Path:
        return staging / f"kind={kind}"

    stats: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
    if part("stat").exists():
        for r in (
            spark.read.parquet(str(part("stat")))
            .select("topic", "partition", "stat", "n")
            .collect()
        ):
            stats[(r["topic"], r["partition"])][r["stat"]] = int(r["n"])
    ddls: list[tuple[str, str, str]] = []
    events_by_op: dict[str, int] = {}
    if part("event").exists():
        ev = spark.read.parquet(str(part("event")))
        events_by_op = {
            r["op"]: int(r["n"]) for r in ev.groupBy("op").agg(F.count("*").alias("n")).collect()
        }
        ddls = [
            (r["db"], r["tbl"], r["ddl"])
            for r in ev.where(F.col("op") == "ddl")
            .orderBy("order_key")
            .select("db", "tbl", "ddl")
            .collect()
        ]
    quarantine_reasons: dict[str, int] = {}
    if part("quarantine").exists():
        q = spark.read.parquet(str(part("quarantine")))
        quarantine_reasons = {
            r["reason"]: int(r["n"])
            for r in q.groupBy("reason").agg(F.count("*").alias("n")).collect()
        }

    # offsets seen this hour, as intervals (gaps-and-islands), for later hours' dedupe
    w = Window.partitionBy("topic", "partition").orderBy("offset")
    intervals = (
        distinct.select("topic", "partition", "offset")
        .withColumn("island", F.col("offset") - F.row_number().over(w))
        .groupBy("topic", "partition", "island")
        .agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"))
        .drop("island")
    )
    off_stage = staging / "offsets"
    intervals.coalesce(1).write.parquet(str(off_stage))

    _replace_dir(part("event"), paths.events(hour))
    _replace_dir(part("carry"), paths.carry(hour))
    _replace_dir(part("quarantine"), paths.quarantine(hour))
    _replace_dir(off_stage, paths.offsets(hour))
    records.unpersist()

    defs = fold_ddl(table_defs_before(cfg, paths, hour), ddls)
    schema_file = paths.schema(hour)
    schema_file.parent.mkdir(parents=True, exist_ok=True)
    schema_file.write_text(
        json.dumps({"tables": {k: v.to_json() for k, v in sorted(defs.items())}}, indent=2)
    )

    partitions: list[dict[str, Any]] = []
    for key in sorted(set(input_stats) | set(stats)):
        i = input_stats.get(key, {})
        s = stats.get(key, {})
        partitions.append(
            {
                "topic": key[0],
                "partition": key[1],
                "records": int(i.get("records") or 0),
                "bytes": int(i.get("bytes") or 0),
                "min_offset": i.get("min_offset"),
                "max_offset": i.get("max_offset"),
                "duplicates_in_hour": int((i.get("records") or 0) - (i.get("distinct") or 0)),
                "duplicates_cross_hour": int(cross_dups.get(key, 0)),
                "decoder": dict(sorted(s.items())),
            }
        )
    totals: dict[str, int] = defaultdict(int)
    for p in partitions:
        for k in ("records", "bytes", "duplicates_in_hour", "duplicates_cross_hour"):
            totals[k] += int(p[k])
        for k, v in p["decoder"].items():
            if ":" not in k:
                totals[k] += v
    totals["unreadable_lines"] = n_unreadable
    counters = {
        "pipeline": cfg.name,
        "hour": format_hour(hour),
        "run_id": run_id,
        "format": cfg.format,
        "previous_hour_decoded": paths.counters(prev_hour).is_file(),
        "carried_in_available": carried_in_available,
        "totals": dict(sorted(totals.items())),
        "events_by_op": dict(sorted(events_by_op.items())),
        "ddl": [sql for _, _, sql in ddls],
        "quarantine_reasons": dict(sorted(quarantine_reasons.items())),
        "partitions": partitions,
    }
    cfile = paths.counters(hour)
    cfile.parent.mkdir(parents=True, exist_ok=True)
    tmp = cfile.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(counters, indent=2, default=str))
    tmp.replace(cfile)
    shutil.rmtree(staging, ignore_errors=True)
    return counters


def read_events(spark: SparkSession, cfg: PipelineConfig, hour: datetime) -> DataFrame:
    return spark.read.parquet(str(StatePaths(cfg.warehouse, cfg.name).events(hour)))
