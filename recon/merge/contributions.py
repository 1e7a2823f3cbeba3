"""Events -> state contributions (Spark column expressions, no I/O).

A contribution is one row of the merge state: for a table with a primary key, a live image
(`sign` 1) or a tombstone (`sign` 0) of a key; for a table without one, one copy of a row added
(+1) or removed (-1), identified by the event's order key (`ident`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recon.config import PipelineConfig
from recon.core.watermark import Watermark
from recon.decode.premerge.prefold import SUP_FIELDS

STATE_DDL = (
    "table string, bucket int, key string, ident binary, order_key binary, sign int, "
    "row map<string,string>, event_time_ms bigint, op string, ck bigint"
)
"""`ck`: the row's checksum term (`row_checksum`) for an added row, computed when the row enters
the state (`recon.merge.state.fold`) and kept with it, so an hour's bucket checksums cost what
its changed keys cost, not a pass of `row_key` over every state row (NULL in states written
before it, and for rows a schema change rewrites: filled by the fold)."""
STATE_COLS = [c.split()[0] for c in STATE_DDL.split(", ")]
REPAIR_OP = "repair"
"""The op of a correction from the source (`recon.merge.repairs`): not an event."""


def _source_regex(pattern: str) -> str:
    """A `from:` pattern (`*`, `?` wildcards) as a regular expression of `db.table`."""
    return "^" + re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".") + "$"


def route_expr(cfg: PipelineConfig) -> Column:
    """The published table an event belongs to: the first table whose `from:` matches its
    source `db.table` (config order), else the source table itself."""
    src = F.concat_ws(".", "db", "tbl")
    out: Column | None = None
    for name, t in cfg.tables.items():
        for pattern in t.sources:
            cond = src.rlike(_source_regex(pattern))
            out = F.when(cond, F.lit(name)) if out is None else out.when(cond, F.lit(name))
    return src if out is None else out.otherwise(src)


# Java's regular expressions end a line (`.`, `$`) at these too; Python's at "\n" only
JAVA_LINE_ENDS = frozenset("\n\r\u0085\u2028\u2029")


def route_table(cfg: PipelineConfig, db: str | None, tbl: str | None) -> str | None:
    """`route_expr` of one source table, in Python; None for a name with a line break in it,
    which the two regular expression engines read apart."""
    src = ".".join(x for x in (db, tbl) if x is not None)
    if not JAVA_LINE_ENDS.isdisjoint(src):
        return None
    for name, t in cfg.tables.items():
        for pattern in t.sources:
            if re.search(_source_regex(pattern), src):
                return name
    return src


def by_key_columns(pks: dict[str, list[str]], build: Callable[[list[str]], Column]) -> Column:
    """`build(key columns)` for each table with a primary key (`pks`: table -> its key
    columns), the tables with the same key sharing one branch; NULL for other tables. Each
    branch's key columns are literals, so the expression has no lambda: a lambda over a
    per-row array of the key's names (`transform`, `forall`) is interpreted row by row, and
    was a quarter of the merge's contributions job (500k-event DataWorks hour, warm)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for table, pk in pks.items():
        if pk:
            groups.setdefault(tuple(pk), []).append(table)
    out: Column | None = None
    for pk_cols, tables in groups.items():
        cond = F.col("table").isin(tables)
        value = build(list(pk_cols))
        out = F.when(cond, value) if out is None else out.when(cond, value)
    return F.lit(None) if out is None else out


def pk_key(img: str, pks: dict[str, list[str]]) -> Column:
    """JSON array of the key columns' canonical text, e.g. `["42"]` (NULL: a table without a
    key); a key column the image lacks is `null` in it."""
    return by_key_columns(pks, lambda pk: F.to_json(F.array(*[F.col(img)[c] for c in pk])))


def row_key(img: Column) -> Column:
    """A whole row as text (non-null columns, sorted by name): the identity of a multiset copy.
    NULL columns are left out, so a row written before an ADD COLUMN matches its later image.

    The text is kept in the state (a keyless table's keys), so it must not change. Its names
    are sorted by `sort_array` (no comparator lambda: `array_sort` calls one per comparison)
    and each value read from `img` itself (a lookup in the filtered map built it again for
    every column): 2.3x less per row, measured (`img` is read inside the lambda once per
    column: pass a column, not an expression)."""
    # the names of non-null values by `filter`, not `map_filter`: Spark generates code for
    # `filter` and `transform`, but `map_filter` is interpreted, and one such expression takes
    # its whole query step out of generated code (every other expression of it interpreted too)
    present = F.filter(F.sort_array(F.map_keys(img)), lambda k: img[k].isNotNull())
    return F.to_json(F.transform(present, lambda k: F.array(k, img[k])))


def _only_names(img: Column, names: list[str]) -> Column:
    """Whether every name of map `img` is one of `names` (NULL for a NULL map: not known)."""
    present = functools.reduce(
        Column.__add__, [F.map_contains_key(img, c).cast("int") for c in names]
    )
    return present == F.size(img)


CHECKSUM_TERMS = 2
"""The form of the state rows' checksum terms (`row_checksum`), kept in each table's manifest
entry (`TableEntry.checksum_terms`). A table whose state holds terms of another form (1, absent
from the entry: xxhash64 of the `row_key` text, before session 49) has every term computed again
by its next merge, which so writes (and publishes) all its buckets once: a bucket checksum is a
sum of terms of one form, the same for the same rows whichever hours wrote them."""


def row_checksum(img: Column, columns: dict[str, list[str]] | None = None) -> Column:
    """A row's term of its bucket's order-independent checksum (summed over the live rows):
    xxhash64 over its non-null (name, value) pairs, names sorted by code point, chained one
    text after the other (Spark hashes an array's elements so, and skips a NULL one: a NULL
    column is left out, so a row written before an ADD COLUMN has the term of its later image).

    No text is built: the terms of a 466k-row Debezium hour took 6.3-7.3 s as xxhash64 of the
    `row_key` text (JSON by Jackson, each value read by a lookup that scans the map's names),
    1.2-1.4 s as this (one JVM, warm). `columns` (table -> its columns, in the order decoders
    write a row's image): a row of one of those tables whose names are its columns in that
    order has its values read by place (`map_values`), one whose names are among them by name;
    other rows go the general way (lambdas, interpreted row by row)."""
    present = F.filter(F.sort_array(F.map_keys(img)), lambda k: img[k].isNotNull())
    out = F.xxhash64(F.flatten(F.transform(present, lambda k: F.array(k, img[k]))))
    for table, cols in (columns or {}).items():
        order = list(dict.fromkeys(cols))
        if not order:
            continue
        names = sorted(order)  # by code point: the order of UTF-8 bytes `sort_array` has
        values = F.map_values(img)
        in_order = F.map_keys(img) == F.array(*[F.lit(c) for c in order])
        by_place = _pairs_hash(names, lambda c: values[order.index(c)])
        is_table = F.col("table") == table
        out = (
            F.when(is_table & in_order, by_place)
            .when(is_table & _only_names(img, names), _pairs_hash(names, lambda c: img[c]))
            .otherwise(out)
        )
    return out


def _pairs_hash(names: list[str], value: Callable[[str], Column]) -> Column:
    """xxhash64 of name, value, name, value... of `names` (in that order), a NULL value's pair
    left out (`row_checksum`)."""
    pairs = [x for c in names for x in (F.when(value(c).isNotNull(), F.lit(c)), value(c))]
    return F.xxhash64(*pairs)


def with_checksum(state: DataFrame, columns: dict[str, list[str]] | None = None) -> DataFrame:
    """State rows with `ck` filled where it is NULL: added rows (sign > 0) get theirs (computed
    only for them: `coalesce` stops at a kept term), others none. `columns`: `row_checksum`'s."""
    fill = F.when(F.col("sign") > 0, row_checksum(F.col("row"), columns))
    return state.withColumn("ck", F.coalesce(F.col("ck"), fill))


def key_bucket(buckets: dict[str, int]) -> Column:
    """The bucket of a state row's `key`: its hash modulo its table's bucket count (`buckets`:
    table -> count; NULL for a table not in it)."""
    counts = F.create_map(*[x for t, n in buckets.items() for x in (F.lit(t), F.lit(n))])
    return F.pmod(F.xxhash64("key"), counts[F.col("table")]).cast("int")


def watermark_skips(
    ev: DataFrame, wm: Watermark, among: Column | None = None
) -> tuple[DataFrame, dict[str, int], dict[str, int]]:
    """(events past the snapshot's watermark, skipped per table, not comparable per table);
    `among`: only these events are compared (the others are kept, and not counted)."""
    at_or_before = F.expr(wm.sql())
    ev = ev.withColumn("_wm", at_or_before if among is None else F.when(among, at_or_before))
    compared = ev if among is None else ev.where(among)
    skipped: dict[str, int] = {}
    not_comparable: dict[str, int] = {}
    for r in compared.groupBy("table", "_wm").agg(F.count("*").alias("n")).collect():
        if r["_wm"] is True:
            skipped[r["table"]] = int(r["n"])
        elif r["_wm"] is None:
            not_comparable[r["table"]] = int(r["n"])
    return ev.where(~F.coalesce(F.col("_wm"), F.lit(False))).drop("_wm"), skipped, not_comparable


SUP = "sup"
"""A contribution's order keys of the changes to its key its event superseded in the decode
(`recon.merge.winners`): an image's from the event's `sup_img`, a tombstone's from `sup_tomb`
(`recon.decode.premerge.prefold`). Empty for contributions of events read as they are."""
SUP_COLUMNS = tuple(f.name for f in SUP_FIELDS)


def _sup(ev: DataFrame, image: Column) -> list[Column]:
    """`SUP` of a slot's contribution, where the events have `SUP_COLUMNS` (`image`: the slot
    of a key's image; the other is a tombstone's)."""
    if not all(c in ev.columns for c in SUP_COLUMNS):
        return []
    return [F.when(image, F.col(SUP_COLUMNS[0])).otherwise(F.col(SUP_COLUMNS[1])).alias(SUP)]


def contributions(
    ev: DataFrame, pks: dict[str, list[str]], carried: tuple[str, ...] = ()
) -> DataFrame:
    """Every contribution the events make (state columns but `bucket`, and the event's
    `carried` columns): an event makes at most two, in two slots, built side by side from one
    read of the events (a union of one filter per kind read the hour's events four times: ~30%
    more for the merge's contributions, measured). Each event is repeated once per slot (an
    explode of the slot numbers), and each column of a contribution is chosen among the
    kinds of the event's slot; exploding an array of the two contributions as structs
    copied both images into it for every event: 4.8 s against 2.5 s for a 500k-event hour,
    warm, on 2 cores.

    `pks` names every table of the events (table -> its key columns; an empty list: keyless).
    Only the kinds of contribution its tables can make are in the expressions: a keyless
    table's cost keyed tables' events even untaken (the contributions and their counts of a
    500k-event DataWorks hour, one JVM, warm: 2.9-3.2 s with them, 2.3-2.6 s without; in
    fresh `recon run`s the job's CPU time 6.0 -> 5.7 s, the mean of four each, within their
    noise). Events with `SUP_COLUMNS` give their contributions `SUP` (`_sup`)."""
    op, before, after = F.col("op"), F.col("before"), F.col("after")
    keyed_tables = [t for t, pk in pks.items() if pk]
    has_pk = F.col("table").isin(keyed_tables)
    full_before = by_key_columns(
        pks,
        lambda pk: functools.reduce(Column.__and__, [F.map_contains_key(before, c) for c in pk]),
    )
    moved = after.isNull() | (pk_key("before", pks) != pk_key("after", pks))
    removes = before.isNotNull() & op.isin("update", "delete")
    no_row = F.lit(None).cast("map<string,string>")
    gone = F.when(op == "delete", "delete").otherwise("pk_change")
    one, two = F.col("_slot") == 0, F.col("_slot") == 1
    keyed = [  # (when, (key, sign, row, op)); the kinds of a slot exclude each other
        (one & has_pk & after.isNotNull(), (pk_key("after", pks), 1, after, op)),  # a key's image
        # a deleted key, or the old key of a primary-key change: a tombstone
        (two & has_pk & removes & full_before & ((op == "delete") | moved),
         (pk_key("before", pks), 0, no_row, gone)),
    ]  # fmt: skip
    keyless = [
        (one & ~has_pk & removes, (row_key(before), -1, before, op)),  # a copy removed
        (two & ~has_pk & after.isNotNull(), (row_key(after), 1, after, op)),  # one added
    ]
    kinds = (keyed if keyed_tables else []) + (keyless if len(keyed_tables) < len(pks) else [])
    kinds = kinds or keyless  # no table named: every event's table is keyless

    def chosen(i: int) -> Column:  # the i-th column of the slot's contribution (NULL: none)
        out = F.when(kinds[0][0], kinds[0][1][i])
        for when, values in kinds[1:]:
            out = out.when(when, values[i])
        return out

    key, sign, row, contrib_op = (chosen(i) for i in range(4))
    slots = F.explode(F.array(F.lit(0), F.lit(1))).alias("_slot")
    return (
        ev.select(*ev.columns, slots)
        .withColumn("sign", sign)
        .where(F.col("sign").isNotNull())  # no contribution in this slot
        .select(
            "table", key.alias("key"), F.col("order_key").alias("ident"), "order_key", "sign",
            row.alias("row"), "event_time_ms", contrib_op.alias("op"), *carried, *_sup(ev, one),
        )
    )  # fmt: skip
