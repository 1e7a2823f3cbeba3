"""Events -> state contributions (Spark column expressions, no I/O).

A contribution is one row of the merge state: for a table with a primary key, a live image
(`sign` 1) or a tombstone (`sign` 0) of a key; for a table without one, one copy of a row added
(+1) or removed (-1), identified by the event's order key (`ident`).
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recon.config import PipelineConfig
from recon.core.watermark import Watermark

STATE_DDL = (
    "table string, bucket int, key string, ident binary, order_key binary, sign int, "
    "row map<string,string>, event_time_ms bigint, op string, ck bigint"
)
"""`ck`: the row's checksum term (`row_checksum`) for an added row, computed when the row enters
the state (`recon.merge.state.fold`) and kept with it, so an hour's bucket checksums cost what
its changed keys cost, not a pass of `row_key` over every state row (NULL in states written
before it, and for rows a schema change rewrites: filled by the fold)."""
STATE_COLS = [c.split()[0] for c in STATE_DDL.split(", ")]


def route_expr(cfg: PipelineConfig) -> Column:
    """The published table an event belongs to: the first table whose `from:` matches its
    source `db.table` (config order), else the source table itself."""
    src = F.concat_ws(".", "db", "tbl")
    out: Column | None = None
    for name, t in cfg.tables.items():
        for pattern in t.sources:
            regex = "^" + re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".") + "$"
            cond = src.rlike(regex)
            out = F.when(cond, F.lit(name)) if out is None else out.when(cond, F.lit(name))
    return src if out is None else out.otherwise(src)


def pk_key(img: str, pk: Column) -> Column:
    """JSON array of the key columns' canonical text, e.g. `["42"]`."""
    return F.to_json(F.transform(pk, lambda c: F.col(img)[c]))


def row_key(img: Column) -> Column:
    """A whole row as text (non-null columns, sorted by name): the identity of a multiset copy.
    NULL columns are left out, so a row written before an ADD COLUMN matches its later image."""
    nn = F.map_filter(img, lambda k, v: v.isNotNull())
    return F.to_json(F.transform(F.array_sort(F.map_keys(nn)), lambda k: F.array(k, nn[k])))


def row_checksum(img: Column) -> Column:
    """A row's term of its bucket's order-independent checksum (summed over the live rows)."""
    return F.xxhash64(row_key(img))


def with_checksum(state: DataFrame) -> DataFrame:
    """State rows with `ck` filled where it is NULL: added rows (sign > 0) get theirs (computed
    only for them: `coalesce` stops at a kept term), others none."""
    fill = F.when(F.col("sign") > 0, row_checksum(F.col("row")))
    return state.withColumn("ck", F.coalesce(F.col("ck"), fill))


def lit_map(d: dict[str, Any]) -> Column:
    """A literal map of name -> list of text (the primary keys of every table)."""
    if not d:
        return F.create_map().cast("map<string,array<string>>")
    items: list[Column] = []
    for k, v in d.items():
        items += [F.lit(k), F.array(*[F.lit(x) for x in v]).cast("array<string>")]
    return F.create_map(*items)


def watermark_skips(
    ev: DataFrame, wm: Watermark
) -> tuple[DataFrame, dict[str, int], dict[str, int]]:
    """(events past the snapshot's watermark, skipped per table, not comparable per table)."""
    ev = ev.withColumn("_wm", F.expr(wm.sql()))
    skipped: dict[str, int] = {}
    not_comparable: dict[str, int] = {}
    for r in ev.groupBy("table", "_wm").agg(F.count("*").alias("n")).collect():
        if r["_wm"] is True:
            skipped[r["table"]] = int(r["n"])
        elif r["_wm"] is None:
            not_comparable[r["table"]] = int(r["n"])
    return ev.where(~F.coalesce(F.col("_wm"), F.lit(False))).drop("_wm"), skipped, not_comparable


def contributions(ev: DataFrame, pks: dict[str, list[str]]) -> DataFrame:
    """Every contribution the events make (state columns but `bucket`)."""
    ev = ev.withColumn("_pk", lit_map(pks)[F.col("table")])
    has_pk = F.size("_pk") > 0
    common: list[Column | str] = [F.col("order_key").alias("ident"), "order_key"]
    full_before = F.forall("_pk", lambda c: F.map_contains_key(F.col("before"), c))
    moved = F.col("after").isNull() | (
        pk_key("before", F.col("_pk")) != pk_key("after", F.col("_pk"))
    )
    removes = F.col("before").isNotNull() & F.col("op").isin("update", "delete")
    no_row = F.lit(None).cast("map<string,string>")
    parts = [
        # a key's new image
        ev.where(has_pk & F.col("after").isNotNull()).select(
            "table", pk_key("after", F.col("_pk")).alias("key"), *common,
            F.lit(1).alias("sign"), F.col("after").alias("row"), "event_time_ms", "op",
        ),
        # a deleted key, or the old key of a primary-key change: a tombstone
        ev.where(has_pk & removes & full_before & ((F.col("op") == "delete") | moved)).select(
            "table", pk_key("before", F.col("_pk")).alias("key"), *common,
            F.lit(0).alias("sign"), no_row.alias("row"), "event_time_ms",
            F.when(F.col("op") == "delete", "delete").otherwise("pk_change").alias("op"),
        ),
        # keyless tables: one copy removed, one copy added
        ev.where(~has_pk & removes).select(
            "table", row_key(F.col("before")).alias("key"), *common,
            F.lit(-1).alias("sign"), F.col("before").alias("row"), "event_time_ms", "op",
        ),
        ev.where(~has_pk & F.col("after").isNotNull()).select(
            "table", row_key(F.col("after")).alias("key"), *common,
            F.lit(1).alias("sign"), F.col("after").alias("row"), "event_time_ms", "op",
        ),
    ]  # fmt: skip
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out
