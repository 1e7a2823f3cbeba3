"""History tables (SCD type 2): every version of every row of a table with `history: true`.

Beside the published table `<db>.<table>`, the Iceberg table `<db>.<table>__history` holds one
row per version of each source row: its columns, `__valid_from` / `__valid_to` (the source's
commit time of the change that made it and of the next change of its key; NULL: the version is
current), the change's order key, operation and source position, `__hour` (the hour that
published it) and `__closed_hour` (the hour of the change that ended it). A delete (or the old key
of a primary-key change) is a version of its own that ends where it starts (`__valid_from` =
`__valid_to`, its key columns only): it ends the version before it and is never current, so the
rows valid at a time are `__valid_from <= t < __valid_to` (or `__valid_to` NULL) and never a
deleted row.

The history is a function of the set of versions, not of the order hours were merged in: an
hour's commit replaces the versions that hour published (`__hour`) with its own and computes the
ends of every version of the keys either touched again, in one Iceberg snapshot (rows whose end
changes are replaced by position deletes and new copies). So a retry, an hour merged again, a
rebuild or a late change arriving out of order gives the same rows, and a rollback removes the
later hours' versions and reopens what they ended (`trim_history`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import AlwaysFalse, BooleanExpression, EqualTo, GreaterThan, In, Or
from pyiceberg.table import Table
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from recon.config import PipelineConfig
from recon.core.schema import TableSchema
from recon.errors import ReconError, TableNotPublishedError
from recon.layout import new_attempt, table_data_run
from recon.objstore import is_s3, uri_of
from recon.publish.deletes import FileChanges, rows_and_positions, write_delete_files
from recon.publish.iceberg import (
    Evolution,
    arrow_schema_of,
    column_exprs,
    commit_files,
    create_table,
    evolution,
    get_catalog,
    identifier,
    key_texts,
    load_or_none,
    local_path,
    spark_type_of_iceberg,
    tag_hour,
    types_of,
    uploaded,
    write_data_files,
)
from recon.publish.result import HistoryResult
from recon.spark.session import job_named, kept_as_rows, release

HISTORY_SUFFIX = "__history"
POSITION_COLUMNS = ("topic", "partition", "offset", "gtid", "binlog_file", "binlog_pos", "seq")
"""The events' source position each version keeps (`__topic`, `__partition`, ...)."""
TOMBSTONES = ("delete", "pk_change")
META = (
    "__key", "__valid_from", "__valid_to", "__order_key", "__op",
    *(f"__{c}" for c in POSITION_COLUMNS), "__hour", "__closed_hour",
)  # fmt: skip


def history_identifier(cat: Catalog, cfg: PipelineConfig, name: str) -> tuple[str, ...]:
    """The history table's catalog name: the published table's, `__history` appended."""
    ident = identifier(cat, cfg, name)
    return (*ident[:-1], ident[-1] + HISTORY_SUFFIX)


def keeps_history(cfg: PipelineConfig, name: str) -> bool:
    t = cfg.tables.get(name)
    return t is not None and t.history


def load_history(cfg: PipelineConfig, name: str) -> Table:
    """Table `name`'s history table; one-line errors for a table without one."""
    if name not in cfg.tables:
        raise ReconError(
            f"table {name} is not configured in {cfg.source_file}; use one of {', '.join(cfg.tables)}"
        )
    if not keeps_history(cfg, name):
        raise ReconError(
            f"table {name} of pipeline {cfg.name} keeps no history; set `history: true` in its "
            f"options in {cfg.source_file}, then `recon rebuild` builds it from the decoded hours"
        )
    cat = get_catalog(cfg)
    try:
        return cat.load_table(history_identifier(cat, cfg, name))
    except NoSuchTableError:
        raise TableNotPublishedError(
            f"the history of table {name} of pipeline {cfg.name} is not published yet; run "
            "`recon run` first"
        ) from None


def versions(contrib: DataFrame, pk: Sequence[str]) -> DataFrame:
    """The versions an hour's contributions of one keyed table make (`recon.merge.contributions`:
    sign 1 an image, 0 a tombstone): a tombstone's row is its key columns, from its key text."""
    if not pk:
        raise ReconError("a history needs a primary key")  # checked by the merge first
    key_row = F.map_from_arrays(F.array(*[F.lit(c) for c in pk]), key_texts(F.col("key"), len(pk)))
    return contrib.where(F.col("sign") >= 0).withColumn(
        "row", F.when(F.col("sign") == 0, key_row).otherwise(F.col("row"))
    )


def publish_history(
    spark: SparkSession,
    cfg: PipelineConfig,
    name: str,
    schema: TableSchema,
    changes: DataFrame,
    touched: list[int],
    props: dict[str, str],
    attempt: tuple[str, str, str],
    ddl: Sequence[tuple[int, str]] = (),
) -> HistoryResult:
    """Hour `props["recon.hour"]`'s versions of table `name` into its history, in one snapshot
    tagged with the hour: `changes` (`versions`: key, bucket, order_key, row, event_time_ms, op
    and `POSITION_COLUMNS`) replace the versions the hour published before, if any; `touched`:
    the buckets of their keys; `ddl`: the hour's DDL of the table (source time, statement),
    which dates the columns it adds (`COLUMNS_SINCE`)."""
    hour = props["recon.hour"]
    cat = get_catalog(cfg)
    ident = history_identifier(cat, cfg, name)
    table = load_or_none(cat, ident)
    existing = types_of(table)
    new = _typed_versions(changes, schema, column_exprs(schema, existing), hour)
    arrow_schema = arrow_schema_of(new)
    if created := table is None:
        table = create_table(cat, ident, arrow_schema, cfg, name, schema)
    evolve = evolution(schema, existing, arrow_schema, created, ("_cdc_", "__"))
    missing = evolve[1]
    target = [(f.name, f.dataType.simpleString()) for f in new.schema.fields]
    scope = Or(_in_buckets(touched), EqualTo("__hour", hour))  # type: ignore[call-arg,arg-type]
    since = {} if created or not missing else _columns_since(table, changes, schema, missing, ddl)
    return _commit_versions(spark, cfg, table, (schema, arrow_schema, evolve, target),
                            (new, scope, F.col("__hour") == hour), props, attempt,
                            since)  # fmt: skip


COLUMNS_SINCE = "recon.columns-since"
"""The history table's property dating the columns added after it was created: column name ->
the source time (ms) from which rows have it (the DDL that added it, else the first change
whose image has it). `recon export --as-of-time` shows a column only from then on."""
COLUMN_DEFAULTS = "recon.column-defaults"
"""Column name -> the value (text) the rows that predate it read from when it was added: the
DDL's default (`recon.core.schema.TableSchema.defaults`), which the source filled without a
change event, so versions written before it do not hold it."""


def _columns_since(
    table: Table,
    changes: DataFrame,
    schema: TableSchema,
    added: list[str],
    ddl: Sequence[tuple[int, str]],
) -> dict[str, str]:
    """`COLUMNS_SINCE` with the columns `added` this hour dated: the first of the hour's DDL
    statements naming the column, else the first of its changes whose image has it; and
    `COLUMN_DEFAULTS` with their defaults."""
    firsts = changes.agg(
        *[F.min(F.when(F.map_contains_key("row", c), F.col("event_time_ms"))) for c in added]
    ).first()
    since = json.loads(table.properties.get(COLUMNS_SINCE, "{}"))
    for i, c in enumerate(added):
        named = [t for t, sql in sorted(ddl) if re.search(rf"\b{re.escape(c)}\b", sql, re.I)]
        at = named[0] if named else (firsts[i] if firsts is not None else None)
        since[c] = at if at is not None else 0
    defaults = json.loads(table.properties.get(COLUMN_DEFAULTS, "{}"))
    defaults.update({c: schema.defaults[c] for c in added if c in schema.defaults})
    return {COLUMNS_SINCE: json.dumps(since), COLUMN_DEFAULTS: json.dumps(defaults)}


def columns_at(table: Table, at_ms: int) -> list[tuple[str, int | None, str | None]]:
    """The history table's source columns a row had at source time `at_ms`, each with when it
    was added (`COLUMNS_SINCE`; None: with the table) and the default the rows before it read
    then (`COLUMN_DEFAULTS`); a renamed column is known by any of its names."""
    since = json.loads(table.properties.get(COLUMNS_SINCE, "{}"))
    defaults = json.loads(table.properties.get(COLUMN_DEFAULTS, "{}"))
    mapping = table.name_mapping()
    aliases = {mf.field_id: list(mf.names) for mf in mapping} if mapping is not None else {}
    out: list[tuple[str, int | None, str | None]] = []
    for f in table.schema().fields:
        if f.name.startswith(("_cdc_", "__")):
            continue
        names = aliases.get(f.field_id, [f.name])
        dated = [since[n] for n in names if n in since]
        if not dated:
            out.append((f.name, None, None))
        elif min(dated) <= at_ms:
            out.append(
                (f.name, min(dated), next((defaults[n] for n in names if n in defaults), None))
            )
    return out


def trim_history(cfg: PipelineConfig, spark: SparkSession, name: str, hour: str) -> HistoryResult:
    """The history of table `name` as it was at the end of `hour` (`recon rollback`): the
    versions later hours published removed, the versions they ended open again, in one
    snapshot tagged with the hour."""
    cat = get_catalog(cfg)
    table = load_or_none(cat, history_identifier(cat, cfg, name))
    if table is None:
        return {"committed": False, "versions_files": 0, "deletes_added": 0}
    target = [
        (f.name, st) for f in table.schema().fields if (st := spark_type_of_iceberg(f.field_type))
    ]
    new = spark.createDataFrame([], ", ".join(f"`{c}` {t}" for c, t in target))
    props = {"recon.pipeline": cfg.name, "recon.hour": hour, "recon.run-id": f"rollback-to-{hour}"}
    later = GreaterThan("__hour", hour)  # type: ignore[call-arg,arg-type]
    return _commit_versions(spark, cfg, table, (None, None, ({}, [], {}), target),
                            (new, later, F.col("__hour") > hour), props,
                            (props["recon.run-id"], hour, new_attempt()))  # fmt: skip


Typing = tuple[TableSchema | None, pa.Schema | None, Evolution, list[tuple[str, str]]]
"""How the commit types its rows: the table's schema and the new rows' Arrow schema (None: no
new rows), the schema's changes (`commit_files`), and every column with its Spark type."""


def _commit_versions(
    spark: SparkSession,
    cfg: PipelineConfig,
    table: Table,
    typing: Typing,
    change: tuple[DataFrame, BooleanExpression, Column],
    props: dict[str, str],
    attempt: tuple[str, str, str],
    table_props: dict[str, str] | None = None,
) -> HistoryResult:
    """One snapshot: `change`'s new versions (typed as `typing` says) in, the versions of the
    hours it replaces (`change`: the files that can hold them or their keys' other versions,
    and the rows) out, and every version of their keys with its end computed again."""
    schema, arrow_schema, evolve, target = typing
    new, scope, replaced = change
    mirror = cfg.layout.object_mirror
    tasks = list(table.scan(row_filter=scope).plan_files())
    old = None
    if tasks:
        names = _file_names(table, evolve[0], target)
        read = ", ".join(f"`{n}` {t}" for n, t in dict(
            (n, t) for c, t in target for n in names[c]).items())  # fmt: skip
        old = _in_columns(rows_and_positions(spark, tasks, mirror, read), names, target)
    plan = kept_as_rows(_plan(old, new, replaced))
    out = table_data_run(local_path(table.location(), mirror), *attempt)
    try:
        with job_named(spark, "history: the versions in and out"):
            adds = plan.where("_add").select(*[c for c, _ in target])
            buckets = [int(r[0]) for r in adds.select("_cdc_bucket").distinct().collect()]
            new_files = write_data_files(spark, adds, sorted(buckets), out) if buckets else []
            name = (lambda p: uri_of(p, mirror)) if is_s3(table.location()) else str
            ends = plan.where("_del").select("file_path", "pos", "_cdc_bucket")
            dels = write_delete_files(spark, table, ends, out / "_del", name)
    finally:
        release(plan)
    hour = props["recon.hour"]
    if not new_files and not dels and not any(evolve):
        sid = table.current_snapshot()
        tag_hour(table, hour, sid.snapshot_id if sid else None)
        return {"committed": False, "versions_files": 0, "deletes_added": 0}
    new_files = uploaded(table, out, new_files, mirror)
    commit_files(table, schema, arrow_schema, evolve, new_files, FileChanges(add_deletes=dels),
                 props, hour, table_props)  # fmt: skip
    return {"committed": True, "versions_files": len(new_files), "deletes_added": len(dels)}


def _file_names(
    table: Table, moved: dict[str, str | None], target: list[tuple[str, str]]
) -> dict[str, list[str]]:
    """Each column of `target`: the names the table's data files may hold it under (its own;
    a former name of a rename, from the table's name mapping or this commit's `moved`)."""
    mapping = table.name_mapping()
    aliases = {mf.field_id: list(mf.names) for mf in mapping} if mapping is not None else {}
    names = {f.name: aliases.get(f.field_id, [f.name]) for f in table.schema().fields}
    former = {new: was for was, new in moved.items() if new}
    out = {}
    for c, _ in target:
        known = [c, *names.get(c, [])]
        if c in former:
            known += [former[c], *names.get(former[c], [])]
        out[c] = list(dict.fromkeys(known))
    return out


def _in_columns(
    old: DataFrame, names: dict[str, list[str]], target: list[tuple[str, str]]
) -> DataFrame:
    """Rows read from the table's data files in the columns of `target`, each the first of
    its `names` a file holds; with the rows' `file_path` and `pos`."""
    cols = [F.coalesce(*[F.col(f"`{n}`") for n in names[c]]).cast(t).alias(c) for c, t in target]
    return old.select(*cols, "file_path", "pos")


def _plan(old: DataFrame | None, new: DataFrame, replaced: Column) -> DataFrame:
    """Every row the commit adds (`_add`) or deletes (`_del`, by `file_path` and `pos`): the
    old rows `replaced` picks out deleted; of the new rows and the other old versions of their
    keys and of those keys, one per key and order key (the earliest hour's; an old row before a
    new one), each with its end: the next version's start and hour (a tombstone ends where it
    starts); new rows added, old ones whose end changed deleted and added again."""
    new = new.select(
        "*", F.lit(None).cast("string").alias("file_path"), F.lit(None).cast("bigint").alias("pos")
    )
    rows, removed = new, None
    if old is not None:
        removed = old.where(replaced)
        keys = new.select("__key").unionByName(removed.select("__key")).distinct()
        rows = old.where(~replaced).join(keys, "__key", "left_semi").unionByName(new)
    was = F.col("file_path").isNotNull()
    first = Window.partitionBy("__key", "__order_key").orderBy(
        "__hour", (~was).cast("int"), "__topic", "__partition", "__offset"
    )
    rows = rows.withColumn("_n", F.row_number().over(first))
    by_key = Window.partitionBy("__key").orderBy("__order_key")
    tomb = F.col("__op").isin(*TOMBSTONES)
    to = F.when(tomb, F.col("__valid_from")).otherwise(F.lead("__valid_from").over(by_key))
    closed = F.when(tomb, F.col("__hour")).otherwise(F.lead("__hour").over(by_key))
    ended = rows.where("_n = 1").withColumn("_to", to).withColumn("_closed", closed)
    same = F.col("__valid_to").eqNullSafe(F.col("_to")) & F.col("__closed_hour").eqNullSafe(
        F.col("_closed")
    )
    out = (
        ended.where(~was | ~same)
        .withColumn("__valid_to", F.col("_to"))
        .withColumn("__closed_hour", F.col("_closed"))
        .select(*new.columns, F.lit(True).alias("_add"), was.alias("_del"))
    )
    dropped = [rows.where((F.col("_n") > 1) & was).drop("_n")]
    if removed is not None:
        dropped.append(removed)
    for d in dropped:
        out = out.unionByName(
            d.select(*new.columns, F.lit(False).alias("_add"), F.lit(True).alias("_del"))
        )
    return out


def _in_buckets(buckets: list[int]) -> BooleanExpression:
    return In("_cdc_bucket", set(buckets)) if buckets else AlwaysFalse()  # type: ignore[call-arg,arg-type]


def _typed_versions(
    changes: DataFrame, schema: TableSchema, exprs: list[str], hour: str
) -> DataFrame:
    """The versions as history rows: the columns typed as the published table's are."""
    cols = [F.expr(e).alias(c) for (c, _), e in zip(schema.columns, exprs, strict=True)]
    return changes.select(
        *cols,
        F.col("bucket").cast("int").alias("_cdc_bucket"),
        F.col("key").alias("__key"),
        F.timestamp_millis(F.coalesce("event_time_ms", F.lit(0))).alias("__valid_from"),
        F.lit(None).cast("timestamp").alias("__valid_to"),
        F.lower(F.hex("order_key")).alias("__order_key"),
        F.col("op").alias("__op"),
        *[F.col(c).alias(f"__{c}") for c in POSITION_COLUMNS],
        F.lit(hour).alias("__hour"),
        F.lit(None).cast("string").alias("__closed_hour"),
    )
