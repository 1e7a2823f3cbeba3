"""What the audit reads: the counters and results the decode and merge stages left for the
hour, the offsets index, the carried and quarantined records, the hour's events (aggregates
only) and the previous hour's report. The only I/O of the audit's judgement; the tables' data
is never read, so the cost follows the hour, not the history."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recon.audit.gtid import arrow_gtid_spans
from recon.audit.rules import GtidSpan, PartitionKey, Run
from recon.config import PipelineConfig
from recon.core.watermark import GTID_SOURCE_LOWER_SQL
from recon.decode.input.offset_index import acknowledged_at, earlier_intervals, hour_intervals
from recon.decode.stats import DecodeCounters, read_counters
from recon.errors import NotDecodedError, NotMergedError
from recon.layout import Layout, has_parquet, hour_text, read_json
from recon.merge.result import MergeResult, read_merge_result

SAMPLES_PER_REASON = 3


@dataclass
class HourFacts:
    dec: DecodeCounters
    mer: MergeResult
    runs: dict[PartitionKey, list[Run]]
    """Offset runs read this hour, per partition."""
    earlier_runs: dict[PartitionKey, list[Run]]
    newest_event_ms: dict[str, int]
    gtid: dict[str, GtidSpan]
    previous_gtid: dict[str, dict[str, Any]]
    open_age_hours: float | None
    quarantine_samples: dict[str, list[dict[str, Any]]]
    resets_acknowledged: dict[PartitionKey, str] = field(default_factory=dict)
    """Per partition, the hour of the offset reset acknowledged at or before this hour."""


def read_facts(spark: SparkSession | None, cfg: PipelineConfig, hour: datetime) -> HourFacts:
    layout = cfg.layout
    H = hour_text(hour)
    if not layout.decode_counters(hour).is_file():
        raise NotDecodedError(
            f"hour {H} of pipeline {cfg.name} is not decoded; run `recon run` first"
        )
    if not layout.merge_result(hour).is_file():
        raise NotMergedError(
            f"hour {H} of pipeline {cfg.name} is not merged; run `recon merge --hour {H}` first"
        )
    runs, earlier = offset_runs(layout, hour)
    dec = read_counters(cfg, hour)
    newest, gtid = event_facts(spark, layout, hour, dec.get("newest_event_ms"))
    return HourFacts(
        dec=dec,
        mer=read_merge_result(cfg, hour),
        runs=runs,
        earlier_runs=earlier,
        newest_event_ms=newest,
        gtid=gtid,
        previous_gtid=_previous_gtid(layout, hour),
        open_age_hours=carried_age_hours(layout, hour),
        quarantine_samples=quarantine_samples(layout, hour),
        resets_acknowledged=acknowledged_at(layout, hour),
    )


def offset_runs(
    layout: Layout, hour: datetime
) -> tuple[dict[PartitionKey, list[Run]], dict[PartitionKey, list[Run]]]:
    """(runs of this hour, runs of the earlier hours) per (topic, partition); the earlier
    hours' from the offset index (whole days from their rollups)."""
    this: dict[PartitionKey, list[Run]] = {}
    earlier: dict[PartitionKey, list[Run]] = {}
    H = hour_text(hour)
    for out, t in (
        (this, hour_intervals(layout.offsets(hour), H)),
        (earlier, earlier_intervals(layout, hour)),
    ):
        for topic, part, lo, hi in zip(
            *(t[c].to_pylist() for c in ("topic", "partition", "lo", "hi")), strict=True
        ):
            out.setdefault((topic, int(part)), []).append((int(lo), int(hi)))
    return this, earlier


def event_facts(
    spark: SparkSession | None,
    layout: Layout,
    hour: datetime,
    newest_decoded: dict[str, int] | None = None,
) -> tuple[dict[str, int], dict[str, GtidSpan]]:
    """(newest source time per table, GTID span per source) of the hour's events; the newest
    times as the decode counted them (`newest_decoded`) when it did (hours decoded before it
    did: from the events)."""
    ev_dir = layout.events(hour)
    newest: dict[str, int] = dict(newest_decoded or {})
    if spark is None or not has_parquet(ev_dir):
        return newest, {}
    spans = arrow_gtid_spans(ev_dir)  # None: left to Spark
    if newest_decoded is not None and spans is not None:
        return newest, spans  # nothing to read: no Spark job (reading the files' schema is one)
    ev = spark.read.parquet(str(ev_dir))
    if newest_decoded is None:
        per_table = ev.groupBy(F.concat_ws(".", "db", "tbl").alias("table"))
        for r in per_table.agg(F.max("event_time_ms").alias("t")).collect():
            if r["t"] is not None:
                newest[r["table"]] = int(r["t"])
    return newest, spark_gtid_spans(ev) if spans is None else spans


def spark_gtid_spans(ev: DataFrame) -> dict[str, GtidSpan]:
    """The span (first, last, distinct numbers) of each GTID source in the events `ev`, for
    the hours `recon.audit.gtid.arrow_gtid_spans` declines."""
    # GTID numbers per source: MySQL uuid:N, MariaDB domain-server-seq (ordered per domain)
    mysql = F.col("gtid").contains(":")
    num = F.when(mysql, F.substring_index("gtid", ":", -1)).otherwise(
        F.split_part("gtid", F.lit("-"), F.lit(3))
    )
    # a MySQL GTID's text before its last `:`, found without a regular expression: the
    # source's expression (`GTID_SOURCE_LOWER_SQL`, a regular expression) runs once per
    # group below, on that text and a `:`, which it reads as it reads the GTID
    before_n = F.expr(
        "substring(gtid, 1, length(gtid) - length(substring_index(gtid, ':', -1)) - 1)"
    )
    key = F.when(mysql, before_n).otherwise(
        F.concat(F.lit("domain "), F.split_part("gtid", F.lit("-"), F.lit(1)))
    )
    # a number only where the text is digits: a cast that fails costs ~3 us a row (an hour of
    # GTID sets such as `uuid:1-5` spent ~1.5 s of 500k rows in failed casts)
    n = F.when(num.rlike("^[0-9]+$"), num.try_cast("bigint"))
    g = ev.where(F.col("gtid").isNotNull() & (F.col("gtid") != "")).select(
        mysql.alias("mysql"), key.alias("key"), n.alias("n")
    )
    # the distinct numbers per source as bitmaps of 32,768 numbers each (Spark's `bitmap_*`
    # functions), OR-ed across the texts of one source and counted: a count of distinct
    # numbers shuffled every distinct number, and ran the regular expression on every row
    # (500k-event Debezium hour, warm: 2.2-2.7 s -> 1.4-1.5 s)
    bits = (
        g.where(F.col("n").isNotNull())
        .groupBy("mysql", "key", F.expr("bitmap_bucket_number(n)").alias("b"))
        .agg(
            F.min("n").alias("lo"),
            F.max("n").alias("hi"),
            F.expr("bitmap_construct_agg(bitmap_bit_position(n))").alias("bits"),
        )
        .withColumn("gtid", F.concat("key", F.lit(":")))
        .groupBy(
            F.when(F.col("mysql"), F.expr(GTID_SOURCE_LOWER_SQL))
            .otherwise(F.col("key"))
            .alias("src"),
            "b",
        )
        .agg(
            F.min("lo").alias("lo"),
            F.max("hi").alias("hi"),
            F.expr("bitmap_or_agg(bits)").alias("bits"),
        )
    )
    agg = bits.groupBy("src").agg(
        F.min("lo").alias("lo"),
        F.max("hi").alias("hi"),
        F.sum(F.expr("bitmap_count(bits)")).alias("k"),
    )
    return {
        r["src"]: {"first": int(r["lo"]), "last": int(r["hi"]), "distinct": int(r["k"])}
        for r in agg.collect()
    }


def carried_age_hours(layout: Layout, hour: datetime) -> float | None:
    """Age at the hour's end of the oldest record carried out of it (an open transaction)."""
    d = layout.carry(hour)
    files = sorted(d.glob("*.parquet")) if d.is_dir() else []
    if not files:
        return None
    ts = [
        x
        for x in pq.read_table(files, columns=["raw_ts_ms"]).column(0).to_pylist()
        if x is not None
    ]
    if not ts:
        return None
    end = hour + timedelta(hours=1)
    return (end.timestamp() * 1000 - min(ts)) / 3600_000


def quarantine_samples(layout: Layout, hour: datetime) -> dict[str, list[dict[str, Any]]]:
    """A few quarantined records per reason, with their coordinates and bytes (base64)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for d in (layout.quarantine(hour), layout.merge_quarantine(hour)):
        if d.is_dir() and any(d.rglob("*.parquet")):
            _add_samples(out, ds.dataset(str(d), format="parquet"))
    return out


def _add_samples(out: dict[str, list[dict[str, Any]]], data: ds.Dataset) -> None:
    wanted = ("topic", "partition", "offset", "reason", "raw_value")
    cols = [c for c in wanted if c in data.schema.names]
    for batch in data.to_batches(columns=cols, batch_size=1024):
        for r in batch.to_pylist():
            reason = str(r.get("reason") or "")
            bucket = out.setdefault(reason.split(":", 1)[0], [])
            if len(bucket) < SAMPLES_PER_REASON:
                bucket.append(_sample(r, reason))
        if len(out) > 20 and all(len(v) >= SAMPLES_PER_REASON for v in out.values()):
            break


def _sample(r: dict[str, Any], reason: str) -> dict[str, Any]:
    v = r.get("raw_value")
    return {
        "topic": r.get("topic"),
        "partition": r.get("partition"),
        "offset": r.get("offset"),
        "reason": reason[:500],
        "value_base64": base64.b64encode(v[:512]).decode() if v else None,
    }


def _previous_gtid(layout: Layout, hour: datetime) -> dict[str, dict[str, Any]]:
    prev = layout.report(hour - timedelta(hours=1))
    if not prev.is_file():
        return {}
    return dict(read_json(prev).get("decoding", {}).get("gtid", {}))
