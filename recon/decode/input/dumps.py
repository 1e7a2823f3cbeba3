"""Read one hour of raw Kafka dumps (contract 2.1) into the normalized raw-record frame.

Layouts and listing: `recon.rawdumps` (Kafka Connect's files are read as Parquet dumps once
`recon.decode.input.connect_input` has converted them). Parquet files use Spark's Kafka source
schema; JSON Lines use the same names with base64 `key`/`value`/header values and
epoch-millisecond `timestamp`. A JSON line that cannot be read at all is kept, with its text,
for the quarantine.
"""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recon.errors import ReconError
from recon.hours import format_hour
from recon.rawdumps import HourFiles

JSONL_SCHEMA = (
    "key STRING, value STRING, topic STRING, partition INT, offset BIGINT, timestamp BIGINT, "
    "timestampType INT, headers ARRAY<STRUCT<key: STRING, value: STRING>>"
)

# A Parquet dump file as Spark's Kafka source writes it (what the demo and the benchmark write)
KAFKA_PARQUET_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
)


def check_complete(files: list[HourFiles], hour: datetime, allow_incomplete: bool) -> None:
    missing = [f for f in files if not f.complete]
    if missing and not allow_incomplete:
        f = missing[0]
        raise ReconError(
            f"hour {format_hour(hour)} of topic {f.topic} is not complete: waiting for "
            f"{f.waiting_for}; wait for the dumper, or pass --allow-incomplete to decode what "
            "is there"
        )


def read_hour(spark: SparkSession, files: list[HourFiles]) -> tuple[DataFrame, DataFrame | None]:
    """(records, unreadable): normalized raw records, and JSON lines that could not be parsed
    (None without JSON Lines dumps: a Parquet dump has no such lines).

    records: topic, partition, offset, key, value, ts_ms, headers, carried=false, skip=0.
    unreadable: topic, file, line (text).
    """
    parts: list[DataFrame] = []
    bad_parts: list[DataFrame] = []
    for hf in files:
        if hf.parquet:
            parts.append(_read_parquet(spark, hf))
        if hf.jsonl:
            ok, bad = _read_jsonl(spark, hf)
            parts.append(ok)
            bad_parts.append(bad)
    records = parts[0] if parts else spark.createDataFrame([], RAW_DDL)
    for more in parts[1:]:
        records = records.unionByName(more)
    records = records.withColumn("carried", F.lit(False)).withColumn("skip", F.lit(0))
    unreadable = bad_parts[0] if bad_parts else None
    for more in bad_parts[1:]:
        unreadable = unreadable.unionByName(more) if unreadable is not None else more
    return records, unreadable


RAW_DDL = (
    "topic string, partition int, offset long, key binary, "
    "value binary, ts_ms long, headers array<struct<key:string,value:binary>>"
)
_HEADERS = "array<struct<key:string,value:binary>>"


def _read_parquet(spark: SparkSession, hf: HourFiles) -> DataFrame:
    """Parquet dumps in Spark's Kafka source schema (some columns may be missing)."""
    df = spark.read.option("mergeSchema", "true").parquet(*hf.parquet)
    cols = set(df.columns)
    headers = F.col("headers") if "headers" in cols else F.lit(None)
    ts = (
        (F.col("timestamp").cast("timestamp").cast("double") * 1000).cast("long")
        if "timestamp" in cols
        else F.lit(None).cast("long")
    )
    return df.select(
        F.coalesce(F.col("topic"), F.lit(hf.topic)).alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("offset"),
        F.col("key").cast("binary").alias("key"),
        F.col("value").cast("binary").alias("value"),
        ts.alias("ts_ms"),
        headers.cast(_HEADERS).alias("headers"),
    )


def _read_jsonl(spark: SparkSession, hf: HourFiles) -> tuple[DataFrame, DataFrame]:
    """JSON Lines dumps (base64 key/value/headers): (readable records, unreadable lines). A line
    is read as text first, so one that cannot be used (not JSON, JSON without a partition or an
    offset, or a key, value or header value that is not base64) keeps its exact text for the
    quarantine; blank lines are not records."""
    text = spark.read.text(list(hf.jsonl)).where(F.trim("value") != "")
    raw = text.select(
        F.from_json("value", JSONL_SCHEMA, {"mode": "PERMISSIVE"}).alias("j"),
        F.col("value").alias("line"),
    )

    def b64(c: Column) -> Column:  # null for text that is not base64 (`unbase64` fails the job)
        return F.try_to_binary(c, F.lit("base64"))

    def decodes(c: Column) -> Column:
        return c.isNull() | b64(c).isNotNull()

    headers_decode = F.coalesce(F.forall("j.headers", lambda h: decodes(h["value"])), F.lit(True))
    readable = (
        F.col("j.partition").isNotNull()
        & F.col("j.offset").isNotNull()
        & decodes(F.col("j.key"))
        & decodes(F.col("j.value"))
        & headers_decode
    )
    ok = raw.where(readable).select(
        F.coalesce(F.col("j.topic"), F.lit(hf.topic)).alias("topic"),
        F.col("j.partition").alias("partition"),
        F.col("j.offset").alias("offset"),
        b64(F.col("j.key")).alias("key"),
        b64(F.col("j.value")).alias("value"),
        F.col("j.timestamp").alias("ts_ms"),
        F.transform(
            "j.headers",
            lambda h: F.struct(h["key"].alias("key"), b64(h["value"]).alias("value")),
        ).alias("headers"),
    )
    bad = raw.where(~readable | F.col("j").isNull()).select(
        F.lit(hf.topic).alias("topic"), F.input_file_name().alias("file"), "line"
    )
    return ok, bad
