"""The two comparison paths of the speed benchmark, each run as its own process by
`benchmarks.run` on a local Spark session with the same settings `recon run` gets
(`recon.spark.session.get_spark`: driver memory, shuffle partitions, split size):

  copy   the floor: read the hour's dump files, write their values as Parquet
  naive  what a user would write: parse each value with a schema (`from_json`; for Tencent
         protobuf a Python UDF with the generated classes, envelopes taken as whole), keep
         the last change per key by the sequence (`max_by`), drop deleted keys, write Parquet

Run: python -m benchmarks.paths {copy|naive} --format F --hour-dir DIR --out DIR
Prints one line `rows N` (the rows written).
"""

from __future__ import annotations

import argparse
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recon.spark.session import get_spark

_DW_IMAGE = (
    "struct<dataColumn: struct<id: bigint, customer: string, amount: string, status: string, "
    "updated_at: bigint, note: string>>"
)
DW_SCHEMA = (
    f"payload struct<before: {_DW_IMAGE}, after: {_DW_IMAGE}, sequenceId: string, op: string>"
)
_DBZ_IMAGE = (
    "struct<id: int, customer: string, amount: string, status: string, updated_at: bigint, "
    "note: string>"
)
DBZ_SCHEMA = f"payload struct<before: {_DBZ_IMAGE}, after: {_DBZ_IMAGE}, op: string>"


def copy(df: DataFrame) -> DataFrame:
    return df.select("partition", "offset", "value")


def _typed(img: Column, amount: Column) -> list[Column]:
    return [
        img["customer"].alias("customer"),
        amount.alias("amount"),
        img["status"].alias("status"),
        F.timestamp_millis(img["updated_at"]).alias("updated_at"),
        F.unbase64(img["note"]).alias("note"),
    ]


def _last_per_key(changes: DataFrame) -> DataFrame:
    """changes: id, seq, deleted, + columns -> the live rows after the last change per key."""
    cols = [c for c in changes.columns if c not in ("id", "seq")]
    last = changes.groupBy("id").agg(F.max_by(F.struct(*cols), "seq").alias("r"))
    return last.where(~F.col("r.deleted")).select("id", *[f"r.{c}" for c in cols if c != "deleted"])


def naive_dataworks(df: DataFrame) -> DataFrame:
    p = df.select(F.from_json(F.col("value").cast("string"), DW_SCHEMA)["payload"].alias("p"))
    p = p.where(F.col("p.op").isin("INSERT", "UPDATE_AFTER", "DELETE"))
    img = F.coalesce(F.col("p.after.dataColumn"), F.col("p.before.dataColumn"))
    return _last_per_key(
        p.select(
            img["id"].alias("id"),
            F.col("p.sequenceId").cast("decimal(20,0)").alias("seq"),
            (F.col("p.op") == "DELETE").alias("deleted"),
            *_typed(img, img["amount"].cast("decimal(10,2)")),
        )
    )


def naive_debezium(df: DataFrame) -> DataFrame:
    p = df.where(F.col("value").isNotNull()).select(
        "offset", F.from_json(F.col("value").cast("string"), DBZ_SCHEMA)["payload"].alias("p")
    )
    img = F.coalesce(F.col("p.after"), F.col("p.before"))
    cents = F.conv(F.hex(F.unbase64(img["amount"])), 16, 10).cast("decimal(12,0)")
    return _last_per_key(
        p.select(
            img["id"].alias("id"),
            F.col("offset").alias("seq"),  # a key's changes share its partition: offset order
            (F.col("p.op") == "d").alias("deleted"),
            *_typed(img, (cents / 100).cast("decimal(10,2)")),
        )
    )


_PB_ROW = T.StructType(
    [
        T.StructField("id", T.IntegerType()),
        T.StructField("seq", T.LongType()),
        T.StructField("deleted", T.BooleanType()),
        T.StructField("customer", T.StringType()),
        T.StructField("amount", T.StringType()),
        T.StructField("status", T.StringType()),
        T.StructField("updated_at", T.StringType()),
        T.StructField("note", T.BinaryType()),
    ]
)


def _decode_tencent(value: bytes | None) -> list[tuple[Any, ...]]:
    from recon._proto import tencent_subscribe_pb2 as pb

    if value is None:
        return []
    env = pb.Envelope.FromString(value)
    out = []
    for item in pb.Entries.FromString(env.data).items:
        if not item.event.HasField("dmlEvent"):
            continue
        dml = item.event.dmlEvent
        deleted = dml.dmlEventType == pb.DELETE
        for row in dml.rows:
            cols = row.oldColumns if deleted else row.newColumns
            idv, cust, amount, status, upd, note = cols
            out.append(
                (int(idv.sv), item.header.seqId, deleted, cust.bv.decode(), amount.sv,
                 status.bv.decode(), upd.bv.decode(), note.bv)
            )  # fmt: skip
    return out


def naive_tencent(df: DataFrame) -> DataFrame:
    decode = F.udf(_decode_tencent, T.ArrayType(_PB_ROW))
    rows = df.select(F.explode(decode("value")).alias("r")).select("r.*")
    return _last_per_key(
        rows.withColumn("amount", F.col("amount").cast("decimal(10,2)")).withColumn(
            "updated_at", F.to_timestamp("updated_at")
        )
    )


NAIVE = {
    "dataworks_json": naive_dataworks,
    "debezium_json": naive_debezium,
    "tencent_dts_pb": naive_tencent,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", choices=["copy", "naive"])
    ap.add_argument("--format", required=True, choices=sorted(NAIVE))
    ap.add_argument("--hour-dir", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    spark = get_spark(f"bench-{args.path}")
    df = spark.read.parquet(args.hour_dir)
    out = copy(df) if args.path == "copy" else NAIVE[args.format](df)
    out.write.mode("overwrite").parquet(args.out)
    # the row count from the written files' footers (no second pass over the data)
    print(f"rows {spark.read.parquet(args.out).count()}")
    spark.stop()


if __name__ == "__main__":
    main()
