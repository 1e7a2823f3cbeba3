"""The fold of contributions into the state, and what the state publishes (Spark plans).

Per key the contribution with the highest (order key, sign) wins; a keyless table keeps its
contributions as a set and publishes `sum(sign)` copies of a row. Both are max/union folds, so
applying hours twice or in any order gives the same state.
"""

from __future__ import annotations

import functools
from typing import TypedDict

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from recon.merge.contributions import REPAIR_OP, STATE_COLS, SUP, key_bucket, with_checksum

U64 = 1 << 64


def is_multiset(ms_tables: list[str]) -> Column:
    return F.col("table").isin(ms_tables) if ms_tables else F.lit(False)


def keyed_live(ms_tables: list[str]) -> Column:
    """A state row that is a live row of a table with a key: its key's image (sign 1)."""
    return ~is_multiset(ms_tables) & (F.col("sign") == 1)


def is_main() -> Column:
    """A contribution that stands for its event (`main_contributions`): not a repair's."""
    return (
        ~F.col("op").isin("pk_change", REPAIR_OP)
        & ((F.col("sign") != -1) | (F.col("op") == "delete"))
        & (F.length("order_key") > 0)
    )


def main_contributions(contrib: DataFrame) -> DataFrame:
    """One contribution per event (a PK change's tombstone and a multiset update's -1 copy ride
    along), so skips and applies count events; out-of-band snapshot rows are apart."""
    return contrib.where(is_main())


# Up to this many changes, the skip counts send the hour's (table, key, order key) to every
# task instead of shuffling the touched state (a few tens of MB; the state may be 100x more)
BROADCAST_CHANGES = 2_000_000


def skip_counts(
    old: DataFrame,
    contrib: DataFrame,
    ms_tables: list[str],
    changes: int,
    several: bool = False,
) -> dict[str, tuple[int, int]]:
    """Per table (stale, already applied): changes older than what the state holds for their
    key, or already in it (a re-run of an hour: same order key, or same multiset copy).
    `changes`: about how many contributions the hour has. `several`: a key of a keyed table
    may have rows in several of `old`'s files (a bucket's base and its deltas, `fold_delta`):
    its newest is taken."""
    is_ms = is_multiset(ms_tables)
    main = main_contributions(contrib)
    olds = old.where(~is_ms & (F.col("sign") >= 0)).select(
        "table", "key", F.col("order_key").alias("old_ok")
    )
    if several:
        olds = olds.groupBy("table", "key").agg(F.max("old_ok").alias("old_ok"))
    ok, old_ok = F.col("order_key"), F.col("old_ok")
    own = F.col("_main")
    if SUP in contrib.columns:  # the changes superseded in the decode count as their own would
        keyed = contrib.where(~is_ms & (is_main() | (F.size(SUP) > 0))).select(
            "table", "key", "order_key", is_main().alias("_main"), SUP
        )
        below = F.size(F.filter(SUP, lambda x: x < old_ok))
        at = F.size(F.filter(SUP, lambda x: x == old_ok))
    else:
        keyed = main.where(~is_ms).select("table", "key", "order_key", F.lit(True).alias("_main"))
        below = at = F.lit(0)
    if changes <= BROADCAST_CHANGES:
        keyed = F.broadcast(keyed)
    cmp = (
        keyed.join(olds, ["table", "key"], "inner")
        .groupBy("table")
        .agg(
            F.sum(F.when(own & (ok < old_ok), 1).otherwise(0) + below).alias("stale"),
            F.sum(F.when(own & (ok == old_ok), 1).otherwise(0) + at).alias("again"),
        )
    )
    out = {r["table"]: (int(r["stale"] or 0), int(r["again"] or 0)) for r in cmp.collect()}
    if ms_tables:
        ms_again = (
            main.where(is_ms)
            .join(old.where(is_ms), ["table", "key", "ident", "sign"], "left_semi")
            .groupBy("table")
            .agg(F.count("*").alias("n"))
        )
        for r in ms_again.collect():
            out[r["table"]] = (0, int(r["n"]))
    return out


CID = "_cid"
"""A contribution's number, unique among its hour's (`numbered`): the fold decides each key's
winner over narrow rows (`_winners`) and finds the winner's whole row by it."""
FOLD_CONF = {
    # the fold joins the wide rows, shuffled by (table, bucket), to their keys' winners: both
    # sides stay in that partitioning (a shuffle by every join key would spread a bucket over
    # several tasks, and its state over several files), and no bucket is split as skewed
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
    "spark.sql.adaptive.skewJoin.enabled": "false",
}
"""The session settings a write of `fold`'s or `fold_delta`'s rows is planned with."""
KEYS = ("table", "bucket", "key")
_WON = ("order_key", "sign", "_old", CID)


def numbered(contrib: DataFrame) -> DataFrame:
    """Contributions with their `CID`: computed once, by the job that first reads a kept copy
    of them (`recon.spark.session.kept_as_rows`), so every later read sees the same numbers."""
    return contrib.withColumn(CID, F.monotonically_increasing_id())


def _winners(rows: DataFrame, tables: list[str], **more: Column) -> DataFrame:
    """Per (table, bucket, key) of `rows` (old state rows, `_old` 1, and contributions, `_old`
    0, numbered), the winner's order key, sign, `_old` and `CID`, from a narrow aggregate: the
    highest (order key, sign), the old row on a tie (an hour merged again adds nothing), then
    the highest number (contributions of one change, replayed: the same row). `more`: other
    aggregates of the group, by name. Deciding over narrow rows and joining the winners' wide
    rows to them by a hash table (`_joined`), instead of a `max_by` of the whole rows, which
    sorted every row with its image and copied it through an interpreted aggregate: a 1M-key
    hour's fold and write, one JVM, warm, 7.9-8.8 s against 4.7-5.4 s (fresh `recon run`s:
    13% less CPU; benchmarks/HISTORY.md, session 68)."""
    best = F.max(F.struct(*_WON)).alias("w")
    return (
        rows.groupBy(_sort_first(tables), *KEYS)
        .agg(best, *[m.alias(name) for name, m in more.items()])
        .select(
            *[F.col(c).alias(f"_w{c}") for c in KEYS],
            *[F.col(f"w.{c}").alias(f"_w{c}") for c in _WON],
            *more,
        )
    )


def _joined(wide: DataFrame, won: DataFrame, on: tuple[str, ...]) -> DataFrame:
    """The rows of `wide` that are their key's winner (`won`: `_winners`), compared on the
    columns `on` (NULL equal to NULL), by a hash table of the winners in each task."""
    # (table, bucket) compared as they are, so that the join keeps the rows' partitioning by
    # them (no row has either NULL: a state row's table is a configured one, its bucket a hash
    # modulo the table's count); the rest NULL-safe, as the grouping compares them
    same = [F.col(c) == F.col(f"_w{c}") for c in ("table", "bucket")]
    cond = functools.reduce(
        Column.__and__, same + [F.col(c).eqNullSafe(F.col(f"_w{c}")) for c in on]
    )
    return wide.join(won.hint("shuffle_hash"), cond, "inner")


def fold(
    old: DataFrame,
    contrib: DataFrame,
    ms_tables: list[str],
    columns: dict[str, list[str]] | None = None,
    forget_before_ms: int | None = None,
) -> DataFrame:
    """The new state of the touched buckets: old state rows and this hour's contributions
    (`numbered`); written with `FOLD_CONF`.

    One shuffle of the rows, by (table, bucket): it leaves each bucket in one task, so the
    state is written one file per bucket without shuffling the new state again. Each key's
    winner is decided over narrow rows (`_winners`), grouped by `_sort_first` before (table,
    bucket, key), so that the sort the grouping needs decides nearly every comparison by its
    first 8 bytes. `columns` (table -> its columns, in their order; its tables also number
    `_sort_first`'s): the checksum terms of those tables' rows are computed without lambdas
    (`row_checksum`).
    `forget_before_ms` (a pipeline with `retention_hours`): a key's tombstone from a delete
    older than it is dropped, so deleted keys do not pile up in the state for ever (a change
    to the key older than the delete arriving after that would be applied: the window bounds
    how late a change may come). Only here, where a bucket is written whole: a delta's
    tombstone hides the base's row of its key."""
    is_ms = is_multiset(ms_tables)
    # an old row is one of its key's rows in a bucket's base and deltas, each with a higher
    # (order key, sign) than the one before (`fold_delta`): no number needed
    olds = old.withColumns({CID: F.lit(-1).cast("long"), "_old": F.lit(1)})
    hour = contrib.select(*STATE_COLS, CID).withColumn("_old", F.lit(0))
    allc = olds.unionByName(hour).repartition("table", "bucket")
    keyed = allc.where(~is_ms)
    won = _winners(keyed, sorted(columns or {}))
    # an inner join (a semi join is pushed below the shuffle, into each side of the union)
    pk_state = _joined(keyed, won, ("key", *_WON)).select(*STATE_COLS)
    if forget_before_ms is not None:
        t = F.col("event_time_ms")
        pk_state = pk_state.where(~((F.col("sign") == 0) & (t > 0) & (t < forget_before_ms)))
    ms_state = (
        allc.where(is_ms)
        .dropDuplicates(["table", "bucket", "key", "ident", "sign"])
        .drop(CID, "_old")
    )
    # a row that enters the state (or was read without its checksum term) gets it here: once
    # per changed key, not once per contribution or per state row
    return with_checksum(pk_state.unionByName(ms_state), columns)


DELTA_COLS = ["o_sign", "o_ck"]
"""A delta's rows (`fold_delta`) also carry the sign and checksum term of the state row each
replaces (NULL: a key new to the state): what the bucket's statistics lose by it
(`bucket_stats`). Read as state (`STATE_DDL`), a delta's rows are state rows like any other."""


NARROW_COLS = ["table", "bucket", "key", "order_key", "sign", "ck"]
"""What `old_winners` reads of a state row."""


def old_winners(old: DataFrame, contrib: DataFrame, changes: int, several: bool) -> DataFrame:
    """Per key of a keyed table the hour's contributions change, its newest state row in
    `old` (a bucket's base and deltas), from a narrow scan of them (no images): table, bucket,
    key, order key, sign, checksum term. A key new to the state has none. `several`: a key
    may have a row in several of `old`'s files (a bucket's deltas), of which the newest is
    taken; else each has one, and no grouping is needed.

    The state rows are found by a hash of their table and key: a probe by one long, not two
    texts (20M state rows, 1M keys, warm: 2.1 s, 2.8-3.5 s grouped, against 3.5-4.7 s). A
    row of another key with the same hash is kept too, and changes nothing: `fold_delta`
    finds no contribution of its key (the old row wins), and `skip_counts` joins by the key.
    `changes`: about how many contributions the hour has; up to `BROADCAST_CHANGES` their
    hashes are sent to every task, so the state is scanned, not shuffled."""
    kh = F.xxhash64("table", "key").alias("_kh")
    keys = contrib.select(kh)
    if changes <= BROADCAST_CHANGES:
        keys = F.broadcast(keys)
    found = old.select(*NARROW_COLS, kh).join(keys, "_kh", "left_semi").drop("_kh")
    if not several:
        return found
    newest = F.max_by(F.struct("order_key", "sign", "ck"), F.struct("order_key", "sign"))
    return (
        found.groupBy("table", "bucket", "key")
        .agg(newest.alias("w"))
        .select("table", "bucket", "key", "w.order_key", "w.sign", "w.ck")
    )


def fold_delta(
    olds: DataFrame, contrib: DataFrame, columns: dict[str, list[str]] | None = None
) -> DataFrame:
    """Merge-on-read: the state rows an hour adds to keyed tables' buckets, its delta. Per
    changed key its winner among the hour's contributions (`numbered`) and the key's old
    winner (`olds`: `old_winners`) by the rules of `fold` (`_winners`), kept only when it is
    not the old one, with the old one's sign and term (`DELTA_COLS`). Grouped as `fold`
    groups, so each bucket's delta is one task's; written with `FOLD_CONF`."""
    marked = olds.select(
        *KEYS, "order_key", "sign", "ck", F.lit(1).alias("_old"), F.lit(-1).cast("long").alias(CID)
    )
    hour = contrib.select(*STATE_COLS, CID).withColumn("_old", F.lit(0))
    narrow = marked.unionByName(hour.select(*marked.columns)).repartition("table", "bucket")
    old_one = F.struct(F.col("sign").alias("s"), F.col("ck").alias("c"))
    won = _winners(narrow, sorted(columns or {}), o=F.max(F.when(F.col("_old") == 1, old_one)))
    won = won.where(F.col("_w_old") == 0)
    delta = _joined(hour.repartition("table", "bucket"), won, (CID,)).select(
        *STATE_COLS, F.col("o.s").alias("o_sign"), F.col("o.c").alias("o_ck")
    )
    return with_checksum(delta, columns)


_PLACED_TABLES = 32


def _sort_first(tables: list[str]) -> Column:
    """A long that orders a state row by (table, as its place in `tables`; bucket) and then by
    40 bits of its key's hash: the fold's first grouping column. Spark sorts by the grouping
    columns and compares two rows by their first column's 8 bytes before anything else; with
    the table's name first (the same in every row) each comparison went on to the table and
    key texts (a quarter of the fold's CPU samples in session 46's profile). Grouping by it
    first, the fold and its write of a 500k-event DataWorks hour took 2.23-2.54 s against
    2.67-2.96 s (one JVM, warm); fresh `recon run`s, the fold's CPU 5.15 -> 4.59 s (medians
    of four, `benchmarks.ab`). Speed only: the rows are still grouped by (table, bucket, key)
    after it, so a row whose table is not placed (NULL here: the sort compares it as before,
    by table, bucket and key) changes nothing but the time: a table not in `tables`, and every
    table when there are more than `_PLACED_TABLES` (a lookup per row among so many would cost
    more than the order saves)."""
    places = [x for i, t in enumerate(tables) for x in (F.lit(t), F.lit(i))]
    if len(tables) > _PLACED_TABLES:
        places = []
    place = F.create_map(*places)[F.col("table")] if places else F.lit(None)
    table_bucket = place.cast("long") * 4096 + F.col("bucket")
    return (
        F.shiftleft(table_bucket, 40)
        .bitwiseOR(F.xxhash64("key").bitwiseAND(F.lit((1 << 40) - 1)))
        .alias("_sort_first")
    )


def live_rows(state: DataFrame, ms_tables: list[str]) -> DataFrame:
    """The published rows of state rows: live keys; multiset copies repeated by multiplicity.
    A bucket's rows stay together in a task (the state is read a file per bucket), so publish
    writes them without a shuffle."""
    is_ms = is_multiset(ms_tables)
    cols = ("table", "bucket", "key", "row", "order_key", "event_time_ms", "op", "ck")
    pk_live = state.where(keyed_live(ms_tables)).select(*cols)
    added = F.col("sign") > 0
    ms = (
        state.where(is_ms)
        .repartition("table", "bucket")  # whole buckets per task: one data file per bucket
        .groupBy("table", "bucket", "key")
        .agg(
            F.sum("sign").alias("n"),
            F.max_by(F.when(added, F.col("row")), F.when(added, F.col("ident"))).alias("row"),
            F.max_by(F.when(added, F.col("ck")), F.when(added, F.col("ident"))).alias("ck"),
            F.max(F.when(added, F.col("order_key"))).alias("order_key"),
            F.max(F.when(added, F.col("event_time_ms"))).alias("event_time_ms"),
            F.max_by(F.when(added, F.col("op")), F.when(added, F.col("order_key"))).alias("op"),
        )
        .where(F.col("n") > 0)
        .withColumn("_copy", F.explode(F.sequence(F.lit(1), F.col("n"))))
        .select(*cols)
    )
    return pk_live.unionByName(ms)


class BucketStats(TypedDict):
    rows: int
    checksum: int
    state_rows: int
    unfit: dict[str, int]
    """Per column, live values that would be published as NULL (`unfit_value_checks`)."""
    dup_keys: int
    """Live rows of a keyed table outside their key's bucket: each can be a second live row of
    its key (must be 0). Inside a bucket a key has one state row: `fold` groups by it."""
    lost_rows: int
    """Live rows the written rows replace (a delta's: `DELTA_COLS`; 0 for a rewritten bucket)."""
    lost_checksum: int
    """The sum of those rows' checksum terms."""


def bucket_stats(
    state: DataFrame,
    live: DataFrame,
    checks: dict[str, list[tuple[str, str]]],
    keyed: dict[str, int],
    ms_tables: list[str],
) -> dict[tuple[str, int], BucketStats]:
    """Per (table, bucket) written: live rows, their order-independent checksum (the sum of
    the rows' `ck`, kept with each state row), state rows; and over the live rows, per table's
    `checks` (column, SQL over `row`) the values that do not fit, and the rows of `keyed`
    tables (table -> its buckets) in a bucket their key does not hash to. One job, a sum per
    bucket, no shuffle of the rows (counting distinct keys per bucket was one: ~1 s per
    million state rows, nine tenths of the statistics, for a count the fold's grouping by key
    kept at 0). The live rows of a table with a key are its state rows of sign 1, counted in
    the same scan of the state (a union with `live` read the files twice: ~0.3 s an hour);
    those of a multiset table (`ms_tables`) are read from `live` (`live_rows`)."""
    out: dict[tuple[str, int], BucketStats] = {}
    both = _stats_rows(state, live, ms_tables)
    counted = [  # (table, column, alias of its sum, the check)
        (t, c, f"_u{i}_{j}", bad)
        for i, (t, cols) in enumerate(sorted(checks.items()))
        for j, (c, bad) in enumerate(cols)
    ]
    agg = both.groupBy("table", "bucket").agg(
        F.sum("s").alias("state_rows"),
        F.sum("r").alias("rows"),
        *checksum_sums(F.col("ck")),
        F.sum("l").alias("lost_rows"),
        *checksum_sums(F.col("lck"), "_lck"),
        F.sum(F.when(misplaced(keyed), 1).otherwise(0)).alias("misplaced"),
        *[
            F.sum(F.when((F.col("table") == t) & F.expr(bad), 1).otherwise(0)).alias(alias)
            for t, _, alias, bad in counted
        ],
    )
    for r in agg.collect():
        table = r["table"]
        out[(table, int(r["bucket"]))] = {
            "rows": int(r["rows"]),
            "checksum": checksum_of(r),
            "state_rows": int(r["state_rows"]),
            "unfit": {c: int(r[a]) for t, c, a, _ in counted if t == table and r[a]},
            "dup_keys": int(r["misplaced"]),
            "lost_rows": int(r["lost_rows"] or 0),
            "lost_checksum": checksum_of(r, "_lck"),
        }
    return out


def _stats_rows(state: DataFrame, live: DataFrame, ms_tables: list[str]) -> DataFrame:
    """`bucket_stats`' rows: per state row its bucket, 1 (a state row), whether it is live and
    its term, image and key if so, and whether it replaced a live row (`DELTA_COLS`) and that
    row's term; per live row of a multiset table (`live`) the same, as no state row."""
    lives = keyed_live(ms_tables)
    has_old = "o_sign" in state.columns
    lost = F.coalesce(F.col("o_sign") == 1, F.lit(False)) if has_old else F.lit(False)
    lost_ck = F.when(lost, F.col("o_ck")) if has_old else F.lit(None).cast("bigint")
    both = state.select(
        "table", "bucket", F.lit(1).alias("s"), lives.cast("int").alias("r"),
        *[F.when(lives, F.col(c)).alias(c) for c in ("ck", "row", "key")],
        lost.cast("int").alias("l"), lost_ck.alias("lck"),
    )  # fmt: skip
    if ms_tables:
        ms_live = live.where(is_multiset(ms_tables))
        both = both.unionByName(
            ms_live.select(
                "table",
                "bucket",
                F.lit(0).alias("s"),
                F.lit(1).alias("r"),
                "ck",
                "row",
                "key",
                F.lit(0).alias("l"),
                F.lit(None).cast("bigint").alias("lck"),
            )  # fmt: skip
        )
    return both


def checksum_sums(ck: Column, name: str = "_ck") -> list[Column]:
    """The sum of `ck` (signed 64-bit terms) as two sums that cannot overflow a long (its low
    32 bits, unsigned, and its high 32 bits, signed), `checksum_of` adds them up: exact, as
    the sum of decimal(38,0) it replaces was, at half its cost per row. `name`: the sums'
    names' start, for more than one in an aggregate."""
    return [
        F.sum(ck.bitwiseAND(F.lit(0xFFFFFFFF))).alias(f"{name}_lo"),
        F.sum(F.shiftright(ck, 32)).alias(f"{name}_hi"),
    ]


def checksum_of(r: Row, name: str = "_ck") -> int:
    """The sum `checksum_sums` took, from its row (0 for no term)."""
    return (int(r[f"{name}_hi"] or 0) << 32) + int(r[f"{name}_lo"] or 0)


def misplaced(keyed: dict[str, int]) -> Column:
    """A live row of a keyed table (table -> its buckets) in a bucket other than its key's."""
    if not keyed:
        return F.lit(False)
    # another table's rows have no home bucket (NULL): not counted
    return (F.col("r") == 1) & (F.col("bucket") != key_bucket(keyed))


class EnteredCounts(TypedDict):
    by_op: dict[str, dict[str, int]]
    """Per table: events that entered the merge, by op."""
    pk_changes: dict[str, int]
    snapshot_rows: dict[str, int]
    repaired: dict[str, int]
    """Per table: keys corrected from the source (`recon.merge.repairs`), not events."""


UnfitCounts = dict[str, dict[str, int]]
"""table -> {"changes": n, <column>: n}: the changes set aside as their values do not fit."""


def contribution_counts(
    contrib: DataFrame, unfit: str
) -> tuple[dict[str, set[int]], EnteredCounts, UnfitCounts, dict[str, int]]:
    """In one job: the buckets each table's contributions touch, what entered the merge (events
    by op, primary-key changes, snapshot rows), the changes set aside, by the columns their
    values do not fit (`unfit`: the contributions' column naming them; an event set aside makes
    no contribution enter, and is counted once, by its new image), and about how many keys
    each table's entering contributions change (HyperLogLog, within a few per cent: summed
    over its groups, a key of several ops counts once per op), the rows a delta of the hour
    would hold (`merge_on_read`)."""
    touched: dict[str, set[int]] = {}
    keys: dict[str, int] = {}
    out: EnteredCounts = {"by_op": {}, "pk_changes": {}, "snapshot_rows": {}, "repaired": {}}
    set_aside: UnfitCounts = {}
    main = F.when((F.col("sign") != -1) | (F.col("op") == "delete"), 1).otherwise(0)
    oob = (F.length("order_key") == 0).alias("oob")
    agg = contrib.groupBy("table", "bucket", "op", oob, unfit).agg(
        F.count("*").alias("n"),
        F.sum(main).alias("main"),
        F.approx_count_distinct("key").alias("keys"),
    )
    for r in agg.collect():
        t, n = r["table"], int(r["n"])
        if r[unfit]:
            if r["op"] in ("insert", "update", "snapshot"):  # the new image: once an event
                counts = set_aside.setdefault(t, {"changes": 0})
                for c in ("changes", *r[unfit]):
                    counts[c] = counts.get(c, 0) + int(r["main"])
            continue
        touched.setdefault(t, set()).add(int(r["bucket"]))
        keys[t] = keys.get(t, 0) + int(r["keys"])
        if r["oob"]:
            out["snapshot_rows"][t] = out["snapshot_rows"].get(t, 0) + n
        elif r["op"] == "pk_change":
            out["pk_changes"][t] = out["pk_changes"].get(t, 0) + n
        elif r["op"] == REPAIR_OP:
            out["repaired"][t] = out["repaired"].get(t, 0) + n
        elif r["main"]:
            by_op = out["by_op"].setdefault(t, {})
            by_op[r["op"]] = by_op.get(r["op"], 0) + int(r["main"])
    return touched, out, set_aside, keys
