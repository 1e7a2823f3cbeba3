"""Publishing reconciled tables as Apache Iceberg tables through pyiceberg (contract 4).

Spark writes the data files; pyiceberg commits them. Each table is identity-partitioned by its
state bucket (`_cdc_bucket`), so an hour's commit removes the data files of the buckets it
touched and adds their replacements in one OVERWRITE snapshot: a reader sees the previous
version or the new one, never a mix, and earlier snapshots stay readable for time travel and
rollback. Snapshot properties carry the pipeline, hour, run id and schema version.

The catalog is pyiceberg's SQL catalog on SQLite under the warehouse unless the pipeline's
`catalog:` names another (any pyiceberg catalog: PostgreSQL via SQL, REST, Hive, Glue), or
`PYICEBERG_CATALOG__RECON__URI` names one for every pipeline. Tables are named
`<pipeline>__<db>.<table>` (two levels, for Hive and Glue; older three-level tables stay where
they are). Each hour's version is tagged `hour-<hour>`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
from pyiceberg import types as IT
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import In
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, TableProperties
from pyiceberg.table import _parquet_files_to_data_files as to_data_files
from pyiceberg.table.update.snapshot import ManageSnapshots
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from recon.config import PipelineConfig, catalog_identifier
from recon.core.schema import TableSchema, cast_expr, spark_type, widens
from recon.errors import ConfigError, NoVersionAtHourError, ReconError, TableNotPublishedError
from recon.faults import checkpoint
from recon.layout import read_json, table_data_run
from recon.objstore import iceberg_properties, is_s3, mirrored, upload_tree, uri_of
from recon.publish.deletes import FileChanges, live_positions, replace_files, write_delete_files
from recon.publish.result import PublishResult
from recon.spark.session import job_named, sql_conf

META_COLUMNS = ["_cdc_order_key", "_cdc_source_ts", "_cdc_op", "_cdc_bucket"]


# pyiceberg's own variable for the `recon` catalog's URI: set, it is the catalog of every
# pipeline without `catalog:` (the compose file points it at PostgreSQL)
SHARED_CATALOG_URI = "PYICEBERG_CATALOG__RECON__URI"


def catalog_properties(cfg: PipelineConfig) -> dict[str, str]:
    """The catalog's pyiceberg properties: the pipeline's `catalog:` (`${VAR}`s read from the
    environment; without `type` and `uri`, the default SQLite catalog with its `warehouse`),
    else the shared or default one. A warehouse on S3 gets the environment's endpoint and
    region (`recon.objstore.iceberg_properties`) where the block does not set them."""
    if cfg.catalog:
        props = {k: _expand_env(cfg, k, v) for k, v in cfg.catalog.items()}
        if "type" not in props and "uri" not in props:
            props = {"type": "sql", "uri": f"sqlite:///{cfg.warehouse}/catalog.db", **props}
        if is_s3(props.get("warehouse", "")):
            props = {**iceberg_properties(), **props}
        return props
    shared = os.environ.get(SHARED_CATALOG_URI)
    if shared:  # one catalog database for every pipeline
        return {"type": "sql", "uri": shared, "warehouse": f"file://{cfg.warehouse}/iceberg"}
    return {
        "type": "sql",
        "uri": f"sqlite:///{cfg.warehouse}/catalog.db",
        "warehouse": f"file://{cfg.warehouse}/iceberg",
    }


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand_env(cfg: PipelineConfig, key: str, value: str) -> str:
    """`${NAME}` in a catalog property: the environment's NAME (secrets stay out of the YAML)."""

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in os.environ:
            raise ConfigError(
                f"{cfg.source_file}: `catalog.{key}` reads ${{{m.group(1)}}}, which is not set; "
                f"set it in the environment of Airflow and the Spark driver"
            )
        return os.environ[m.group(1)]

    return _ENV_REF.sub(sub, value)


def get_catalog(cfg: PipelineConfig) -> Catalog:
    props = catalog_properties(cfg)
    if props.get("type") == "sql" and props.get("uri", "").startswith("sqlite:///"):
        Path(props["uri"][len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    return load_catalog(props.pop("name", "recon"), **props)


def identifier(cat: Catalog, cfg: PipelineConfig, table: str) -> tuple[str, ...]:
    """The table's catalog name: `<pipeline>__<db>.<table>` (`catalog_identifier`), or the
    three-level `<pipeline>.<db>.<table>` a table published before that naming still has (it
    stays where it is, readable and published to)."""
    new = catalog_identifier(cfg.name, table)
    if cat.table_exists(new):
        return new
    db, tbl = table.split(".", 1)
    legacy = (cfg.name, db, tbl)
    try:
        return legacy if cat.table_exists(legacy) else new
    except ValueError:  # a catalog that takes two levels only
        return new


def load_table(cfg: PipelineConfig, table: str) -> Table:
    if table not in cfg.tables:
        raise ReconError(
            f"table {table} is not configured in {cfg.source_file}; use one of {', '.join(cfg.tables)}"
        )
    cat = get_catalog(cfg)
    try:
        return cat.load_table(identifier(cat, cfg, table))
    except NoSuchTableError:
        raise TableNotPublishedError(
            f"table {table} of pipeline {cfg.name} is not published yet; run `recon run` first"
        ) from None


def is_published(cfg: PipelineConfig, table: str) -> bool:
    try:
        load_table(cfg, table)
    except TableNotPublishedError:
        return False
    return True


def published_hours(cfg: PipelineConfig, table: str) -> set[str]:
    """The hours the table has versions of (none when it is not published)."""
    try:
        t = load_table(cfg, table)
    except TableNotPublishedError:
        return set()
    return {
        s.summary.additional_properties.get("recon.hour", "")
        for s in t.snapshots()
        if s.summary is not None
    } - {""}


def local_path(uri: str, mirror: Path) -> Path:
    """A table file's path on the file system: a local one's own, an object's copy in `mirror`
    (`recon.objstore.mirrored`)."""
    if is_s3(uri):
        return mirrored(uri, mirror)
    u = urlparse(uri)
    return Path(u.path) if u.scheme in ("file", "") else Path(uri)


def spark_type_of_iceberg(t: Any) -> str | None:
    simple = {
        IT.IntegerType: "int",
        IT.LongType: "bigint",
        IT.FloatType: "float",
        IT.DoubleType: "double",
        IT.BooleanType: "boolean",
        IT.StringType: "string",
        IT.BinaryType: "binary",
        IT.DateType: "date",
        IT.TimestampType: "timestamp_ntz",
        IT.TimestamptzType: "timestamp",
    }
    for k, v in simple.items():
        if isinstance(t, k):
            return v
    if isinstance(t, IT.DecimalType):
        return f"decimal({t.precision},{t.scale})"
    return None


def publish_table(
    spark: SparkSession,
    cfg: PipelineConfig,
    name: str,
    schema: TableSchema,
    live: DataFrame,
    touched: list[int],
    props: dict[str, str],
    attempt: tuple[str, str, str],
    checked: tuple[dict[str, int], int],
    replace_all: bool = False,
    replaced: DataFrame | None = None,
    tag: str = "",
) -> PublishResult:
    """Write the live rows of the touched buckets and commit them in one Iceberg snapshot,
    tagged `hour-<tag>` (default: `props`' hour). `attempt`: (run id, hour, attempt) naming
    the folder this attempt writes (`table_data_run`);
    only files of that folder are committed. `checked`: what the merge counted over the rows
    written (`unfit_value_checks` of `row`): values published as NULL per column, and duplicate keys
    (must be 0). The touched buckets' files are replaced whole (copy-on-write), unless
    `replaced` is given (merge-on-read: `_replaced_rows`)."""
    cat = get_catalog(cfg)
    ident = identifier(cat, cfg, name)
    table = load_or_none(cat, ident)
    existing = types_of(table)
    exprs = column_exprs(schema, existing)
    typed = _typed_rows(live, schema, exprs)
    arrow_schema = arrow_schema_of(typed)
    if created := table is None:
        table = create_table(cat, ident, arrow_schema, cfg, name, schema)
    evolve = evolution(schema, existing, arrow_schema, created)
    moved, missing, promoted = evolve
    tag = tag or props["recon.hour"]
    if not touched and not missing and not promoted and not moved and not replace_all:
        sid = _current_id(table)
        tag_hour(table, tag, sid)
        return {"committed": False, "snapshot_id": sid, "files_added": 0, "files_removed": 0}
    mirror = cfg.layout.object_mirror
    out = table_data_run(local_path(table.location(), mirror), *attempt)
    new_files = write_data_files(spark, typed, touched, out)
    rows = None if replaced is None or replace_all else ((schema, existing), replaced)
    files = _replaced(spark, table, mirror, rows, touched, replace_all, out / "_del")
    new_files = uploaded(table, out, new_files, mirror)
    checkpoint("publish:files-written")
    commit_files(table, schema, arrow_schema, evolve, new_files, files, props, tag)
    table = cat.load_table(ident)
    return {
        "committed": True,
        "snapshot_id": _current_id(table),
        "files_added": len(new_files),
        "files_removed": len(files.remove_data),
        "deletes_added": len(files.add_deletes),
        "table": ".".join(ident),
        "uncastable": checked[0],
        "duplicate_keys": checked[1],
    }


def arrow_schema_of(df: DataFrame) -> pa.Schema:
    """The Arrow schema a table of `df`'s rows is created or evolved with (every field
    nullable, times in UTC)."""
    return pa.schema([f.with_nullable(True) for f in to_arrow_schema(df.schema, timezone="UTC")])


Evolution = tuple[dict[str, str | None], list[str], dict[str, IT.PrimitiveType]]
"""A commit's schema changes: columns renamed or dropped (`renames_and_drops`), columns added,
types promoted (`promotions`)."""


def evolution(
    schema: TableSchema,
    existing: dict[str, str],
    arrow_schema: pa.Schema,
    created: bool,
    meta: tuple[str, ...] = ("_cdc_",),
) -> Evolution:
    """What a commit of rows typed as `arrow_schema` changes in a table whose columns are
    `existing` (`created`: the table was just created with them)."""
    moved = renames_and_drops(schema, existing, meta)
    added = set(existing) | set(moved.values()) if not created else {f.name for f in arrow_schema}
    missing = [f.name for f in arrow_schema if f.name not in added]
    return moved, missing, promotions(schema, existing)


def _replaced(
    spark: SparkSession,
    table: Table,
    mirror: Path,
    rows: tuple[tuple[TableSchema, dict[str, str]], DataFrame] | None,
    touched: list[int],
    replace_all: bool,
    out: Path,
) -> FileChanges:
    """What the commit removes or deletes: the touched buckets' files (`rows` None), or
    position deletes (written into `out`) of the rows of `rows`' keys (merge-on-read)."""
    if rows is None:
        return _replaced_buckets(table, touched, replace_all)
    return _replaced_rows(spark, table, mirror, rows[0], rows[1], touched, out)


def uploaded(table: Table, out: Path, new_files: list[str], mirror: Path) -> list[str]:
    """The attempt's files (`out`) as the commit names them: for a table on S3, uploaded from
    `mirror` (where Spark wrote them) before the commit, by their objects' URIs."""
    if not is_s3(table.location()):
        return new_files
    upload_tree(out, mirror)
    return [uri_of(Path(f), mirror) for f in new_files]


def load_or_none(cat: Catalog, ident: tuple[str, ...]) -> Table | None:
    try:
        return cat.load_table(ident)
    except NoSuchTableError:
        return None


def types_of(table: Table | None) -> dict[str, str]:
    """The Spark type of each column readers already see (none for a new table)."""
    existing: dict[str, str] = {}
    if table is not None:
        for f in table.schema().fields:
            st = spark_type_of_iceberg(f.field_type)
            if st:
                existing[f.name] = st
    return existing


def column_exprs(schema: TableSchema, existing: dict[str, str], src: str = "row") -> list[str]:
    """SQL for each column's published value from the text map `src`: the schema's type, unless
    the table already has another that cannot be promoted to it (then values are cast to what
    readers already see)."""
    exprs: list[str] = []
    for c, lt in schema.columns:
        v = f"{src}['{sql_string(c)}']"
        have = cast_type(lt, existing.get(c))
        if have == spark_type(lt):
            exprs.append(cast_expr(v, lt))
        elif have == "string":
            exprs.append(v)
        elif have == "binary":
            exprs.append(f"try_to_binary({v}, 'base64')")
        else:
            exprs.append(f"try_cast({v} as {have})")
    return exprs


def cast_type(logical: str, have: str | None) -> str:
    """The Spark type a column's text is published as (`column_exprs`): its logical type's,
    unless the table already has another (`have`) that cannot be promoted to it."""
    want = spark_type(logical)
    return want if not have or widens(have, want) else have


def sql_string(text: str) -> str:
    """`text` escaped for a Spark SQL string literal in single quotes."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def published_types(cfg: PipelineConfig, name: str) -> dict[str, str]:
    """The Spark type of each column of table `name` readers already see (none for a new
    table): what `unfit_value_checks` judges against. The merge reads it once per table."""
    cat = get_catalog(cfg)
    return types_of(load_or_none(cat, identifier(cat, cfg, name)))


def unfit_value_checks(
    schema: TableSchema, existing: dict[str, str], src: str
) -> list[tuple[str, str]]:
    """(column, SQL true when the text in map `src` would not survive the cast to the column's
    published type: it would read NULL), for the columns where that can happen (`existing`:
    `published_types`). A MySQL zero date ('0000-00-00', '2020-00-10') is a legitimate NULL,
    not a misfit. The merge sets such changes aside (`src` "after") and counts, over the rows it
    writes, what publish would still turn into NULL (`src` "row")."""
    checks = []
    exprs = column_exprs(schema, existing, src)
    for (c, lt), expr in zip(schema.columns, exprs, strict=True):
        v = f"{src}['{sql_string(c)}']"
        if expr == v:  # published as the text itself: always fits
            continue
        bad = f"({v} is not null and ({expr}) is null)"
        if spark_type(lt) in ("date", "timestamp_ntz", "timestamp"):
            bad = f"({bad} and not {v} rlike '^[0-9]{{4}}-(00-|[0-9]{{2}}-00)')"
        checks.append((c, bad))
    return checks


def _typed_rows(live: DataFrame, schema: TableSchema, exprs: list[str]) -> DataFrame:
    cols = [F.expr(e).alias(c) for (c, _), e in zip(schema.columns, exprs, strict=True)]
    return live.select(
        *cols,
        # by the JVM's case mappings (`ASCII_CASE`: `write_data_files`)
        F.lower(F.hex("order_key")).alias("_cdc_order_key"),
        F.timestamp_millis("event_time_ms").alias("_cdc_source_ts"),
        F.col("op").alias("_cdc_op"),
        F.col("bucket").cast("int").alias("_cdc_bucket"),
    )


def create_table(
    cat: Catalog,
    ident: tuple[str, ...],
    arrow_schema: pa.Schema,
    cfg: PipelineConfig,
    name: str,
    schema: TableSchema,
) -> Table:
    cat.create_namespace_if_not_exists(ident[:-1])
    table = cat.create_table(ident, schema=arrow_schema)
    with table.transaction() as tx:
        tx.set_properties(
            {
                TableProperties.DEFAULT_NAME_MAPPING: table.schema().name_mapping.model_dump_json(),
                "recon.pipeline": cfg.name,
                "recon.source-table": name,
                "recon.primary-key": json.dumps(schema.primary_key),
            }
        )
        with tx.update_spec() as us:
            us.add_identity("_cdc_bucket")
    return cat.load_table(ident)


ASCII_CASE = {"spark.sql.icu.caseMappings.enabled": "false"}
"""`lower` by the JVM's case mappings, for the order keys' hex (ASCII, where the two agree):
ICU's (Spark's default) load their tables on a JVM's first `lower`, ~1 s of CPU, and
`translate`, which does not, cost ~0.4 us a row (a 20M-row state's publish: the order keys'
hex 9.6-10.6 s by `translate`, 2.0-2.4 s by `lower`, warm)."""


def write_data_files(
    spark: SparkSession, typed: DataFrame, touched: list[int], out: Path
) -> list[str]:
    """Spark writes the touched buckets' rows into `out`, a folder of this attempt alone (the
    write refuses an existing one); their paths. A data file holds one bucket (`partitionBy`);
    the rows come a bucket per task (`recon.merge.state.live_rows`), so they are not shuffled
    again (a bucket bigger than an input split is written as a few files)."""
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")  # not INT96
    with job_named(spark, "publish: the touched buckets' data files"), sql_conf(spark, ASCII_CASE):
        (
            typed.where(F.col("_cdc_bucket").isin(touched) if touched else F.lit(False))
            .withColumn("_pb", F.col("_cdc_bucket"))
            .write.mode("errorifexists")
            .partitionBy("_pb")
            .parquet(str(out))
        )
    return sorted(str(p) for p in out.glob("_pb=*/*.parquet"))


def promotions(schema: TableSchema, existing: dict[str, str]) -> dict[str, IT.PrimitiveType]:
    """Columns whose published type Iceberg can promote to the schema's (int -> bigint, float ->
    double, decimal precision up): the column's new Iceberg type. Files written before keep
    their type; Iceberg readers promote them."""
    out: dict[str, IT.PrimitiveType] = {}
    for c, lt in schema.columns:
        have, want = existing.get(c), spark_type(lt)
        if have and have != want and widens(have, want):
            if want == "bigint":
                out[c] = IT.LongType()
            elif want == "double":
                out[c] = IT.DoubleType()
            else:
                p, sc = want.removeprefix("decimal(").rstrip(")").split(",")
                out[c] = IT.DecimalType(int(p), int(sc))
    return out


def renames_and_drops(
    schema: TableSchema, existing: dict[str, str], meta: tuple[str, ...] = ("_cdc_",)
) -> dict[str, str | None]:
    """Published columns the schema no longer has: -> their new name (renamed by DDL), or
    None (dropped by DDL). Versions before keep them (time travel reads them). `meta`: the
    prefixes of the table's own columns, not the source's."""
    out: dict[str, str | None] = {}
    current = {c for c, _ in schema.columns}
    for c in existing:
        if c in current or c.startswith(meta):
            continue
        new = schema.former.get(c)
        out[c] = new if new in current and new not in existing else None
    return out


def _replaced_buckets(table: Table, touched: list[int], replace_all: bool) -> FileChanges:
    """Copy-on-write: the touched buckets' data files (every file: `replace_all`) and their
    position deletes, to remove."""
    if replace_all:
        tasks = list(table.scan().plan_files())
    elif touched:
        in_touched = In("_cdc_bucket", set(touched))  # type: ignore[call-arg,arg-type]
        tasks = list(table.scan(row_filter=in_touched).plan_files())
    else:
        tasks = []
    deletes = {d.file_path: d for t in tasks for d in t.delete_files}
    return FileChanges(remove_data=[t.file for t in tasks], remove_deletes=list(deletes.values()))


def _replaced_rows(
    spark: SparkSession,
    table: Table,
    mirror: Path,
    types: tuple[TableSchema, dict[str, str]],
    replaced: DataFrame,
    touched: list[int],
    out: Path,
) -> FileChanges:
    """Merge-on-read: the new rows are those of the keys the hour changed, `replaced` (their
    `key` and `bucket`): position deletes (written into `out`) of whatever the table publishes
    for those keys now, which the snapshot adds beside the new rows, the buckets' other files
    kept. By key in the table as it is, not by what the state held: an attempt stopped after
    its commit has published rows the state does not know of yet."""
    where = _replaced_positions(spark, table, mirror, types, replaced, touched)
    # named as the table will know them: on S3 once `publish_table` uploaded them
    name = (lambda p: uri_of(p, mirror)) if is_s3(table.location()) else str
    return FileChanges(add_deletes=write_delete_files(spark, table, where, out, name))


def _replaced_positions(
    spark: SparkSession,
    table: Table,
    mirror: Path,
    types: tuple[TableSchema, dict[str, str]],
    replaced: DataFrame,
    touched: list[int],
) -> DataFrame:
    """Where the table publishes rows of the `replaced` keys (their key text, `key`; their
    `bucket`): their data file, place in it and bucket, found by a scan of the touched buckets'
    files, their key columns only (a semi-join with the keys, typed as published: `types`, the
    schema and the types readers already see)."""
    schema, existing = types
    pk = list(schema.primary_key)
    in_touched = In("_cdc_bucket", set(touched))  # type: ignore[call-arg,arg-type]
    tasks = list(table.scan(row_filter=in_touched).plan_files()) if touched else []
    if not tasks:
        return spark.createDataFrame([], "file_path string, pos bigint, _cdc_bucket int")
    # the key text is the JSON array of the key columns' texts (`pk_key`): as a row of them,
    # typed by the expressions that typed the published rows
    texts = key_texts(F.col("key"), len(pk))
    krow = F.map_from_arrays(F.array(*[F.lit(c) for c in pk]), texts)
    exprs = dict(
        zip([c for c, _ in schema.columns], column_exprs(schema, existing, "_k"), strict=True)
    )
    keys = replaced.select(F.col("bucket").cast("int").alias("_cdc_bucket"), krow.alias("_k"))
    typed = keys.select("_cdc_bucket", *[F.expr(exprs[c]).alias(c) for c in pk])
    on = [*pk, "_cdc_bucket"]
    placed = live_positions(spark, tasks, mirror, on, (typed, on))
    return placed.select("file_path", "pos", "_cdc_bucket")


def commit_files(
    table: Table,
    schema: TableSchema | None,
    arrow_schema: pa.Schema | None,
    evolve: Evolution,
    new_files: list[str],
    files: FileChanges,
    props: dict[str, str],
    tag: str,
    table_props: dict[str, str] | None = None,
) -> None:
    """One snapshot of `files` and the data files `new_files` (the touched buckets' old files
    out and the new ones in, or the new rows in and position deletes of the rows they
    replace), with the schema's changes, the hour's tag and `table_props`, in one commit."""
    moved, missing, promoted = evolve
    tx = table.transaction()
    if table_props:
        tx.set_properties(table_props)
    if schema is not None:  # else the rows keep the table's columns (`trim_history`)
        tx.set_properties({"recon.logical-types": json.dumps(dict(schema.columns))})
    if moved:  # DDL renamed or dropped these columns: so does the published table
        with tx.update_schema() as us:
            for c, new in moved.items():
                if new is None:
                    us.delete_column(c)
                else:
                    us.rename_column(c, new)
    if missing or promoted:
        with tx.update_schema() as us:
            for c, t in promoted.items():
                us.update_column(c, field_type=t)
            if missing and arrow_schema is not None:
                us.union_by_name(arrow_schema)
    # read against the schema the transaction has evolved to
    added = list(to_data_files(tx.table_metadata, new_files, table.io))
    replace_files(tx, table.io, dataclasses.replace(files, add_data=added), props)
    new_id = tx.table_metadata.current_snapshot_id
    if new_id is not None:
        with ManageSnapshots(tx) as ms:  # the hour's tag moves with it, in the same commit
            ms.create_tag(new_id, hour_tag(tag))
    tx.commit_transaction()


def hour_tag(hour: str) -> str:
    """The Iceberg tag naming a table's version at the end of `hour` (`hour-2026-01-01T05`):
    any engine can time-travel by hour with it (`VERSION AS OF 'hour-...'`)."""
    return f"hour-{hour}"


def untag_versions(table: Table, snapshot_ids: set[int]) -> None:
    """Remove the hour tags of versions about to expire (a tagged version is kept)."""
    tags = [n for n, r in table.metadata.refs.items() if n.startswith("hour-")]
    gone = [n for n in tags if table.metadata.refs[n].snapshot_id in snapshot_ids]
    if gone:
        with table.manage_snapshots() as ms:
            for n in gone:
                ms.remove_tag(n)


def tag_hour(table: Table, hour: str, snapshot_id: int | None) -> None:
    """Point the hour's tag at `snapshot_id` (the version the hour left), unless it does."""
    ref = table.metadata.refs.get(hour_tag(hour))
    if snapshot_id is None or (ref is not None and ref.snapshot_id == snapshot_id):
        return
    table.manage_snapshots().create_tag(snapshot_id, hour_tag(hour)).commit()


def _current_id(table: Table) -> int | None:
    snap = table.current_snapshot()
    return snap.snapshot_id if snap else None


def snapshot_at_hour(cfg: PipelineConfig, name: str, table: Table, hour: str) -> int:
    """The version of the table at the end of `hour`: the snapshot the hour's saved merge state
    names when it is still there (right after an earlier hour is merged again, too), else the
    last snapshot labelled `hour` or before."""
    saved = cfg.layout.saved_manifest(hour)
    if saved.is_file():
        try:
            sid = read_json(saved)["tables"][name].get("snapshot_id")
        except (ValueError, KeyError):
            sid = None
        if sid is not None and table.snapshot_by_id(int(sid)) is not None:
            return int(sid)
    return snapshot_for_hour(table, hour)


def snapshot_for_hour(table: Table, hour: str) -> int:
    """The last snapshot committed for `hour` or before it (hours compare as text)."""
    best = None
    for s in table.snapshots():
        h = (s.summary.additional_properties if s.summary else {}).get("recon.hour")
        if h is not None and h <= hour and (best is None or s.timestamp_ms >= best.timestamp_ms):
            best = s
    if best is None:
        raise NoVersionAtHourError(
            f"no published version of {'.'.join(table.name())} at or before {hour}"
        )
    return int(best.snapshot_id)


def version_at_hour(
    cfg: PipelineConfig, name: str, hour: str, recorded: int | None | bool
) -> int | None:
    """The snapshot that published table `name` at the end of `hour`, checked to still exist.
    `recorded`: the snapshot id the hour's saved state names (None: the state had no version
    of the table; False: the state is from before ids were kept, then the last snapshot
    labelled `hour` or before is taken). None means the table had no rows then. A version that
    is gone (expired) is an error: restoring an empty table in its place would lose every row."""
    table = load_table(cfg, name)
    if recorded is False:
        try:
            return snapshot_for_hour(table, hour)
        except NoVersionAtHourError:
            raise NoVersionAtHourError(
                f"the version of table {name} at the end of hour {hour} is no longer in its "
                f"history (expired); nothing was changed: roll back to an hour `recon history "
                f"--pipeline {cfg.source_file} --table {name}` still lists, or rebuild the state "
                f"through that hour with `recon rebuild --pipeline {cfg.source_file} --to {hour}`"
            ) from None
    if recorded is None:
        return None
    if table.snapshot_by_id(int(recorded)) is None:
        raise NoVersionAtHourError(
            f"the version of table {name} at the end of hour {hour} (Iceberg snapshot "
            f"{recorded}) is no longer in its history (expired); nothing was changed: roll back "
            f"to an hour `recon history --pipeline {cfg.source_file} --table {name}` still "
            f"lists, or rebuild the state through that hour with `recon rebuild --pipeline "
            f"{cfg.source_file} --to {hour}`"
        )
    return int(recorded)


def restore_version(
    cfg: PipelineConfig, name: str, hour: str, target: int | None
) -> dict[str, Any]:
    """Make snapshot `target` (None: no rows) the table's current version, as a new commit that
    swaps the current files for that version's: readers see the old or the restored version,
    and every version, the undone ones too, stays in the history."""
    table = load_table(cfg, name)
    current = _current_id(table)
    if current == target:
        return {"table": name, "snapshot_id": current, "restored_from": target, "committed": False}
    keep, keep_del = _files_of(table, target)
    now, now_del = _files_of(table, current)
    if keep.keys() == now.keys() and keep_del.keys() == now_del.keys():  # the same content
        return {"table": name, "snapshot_id": current, "restored_from": target, "committed": False}
    props = {
        "recon.pipeline": cfg.name,
        "recon.hour": hour,
        "recon.run-id": f"rollback-to-{hour}",
        "recon.rollback-of": str(current),
        "recon.restored-from": str(target),
    }
    sid = table.snapshot_by_id(target) if target is not None else None
    tprops = sid.summary.additional_properties if sid and sid.summary else {}
    if "recon.schema-version" in tprops:
        props["recon.schema-version"] = tprops["recon.schema-version"]
    tx = table.transaction()
    files = FileChanges(
        [df for p, df in keep.items() if p not in now],
        [df for p, df in now.items() if p not in keep],
        [d for p, d in keep_del.items() if p not in now_del],
        [d for p, d in now_del.items() if p not in keep_del],
    )
    replace_files(tx, table.io, files, props)
    tx.commit_transaction()
    table = load_table(cfg, name)
    return {
        "table": name,
        "snapshot_id": _current_id(table),
        "restored_from": target,
        "committed": True,
    }


def _files_of(
    table: Table, snapshot_id: int | None
) -> tuple[dict[str, DataFile], dict[str, DataFile]]:
    """A snapshot's data files and position-delete files, by path."""
    if snapshot_id is None:
        return {}, {}
    tasks = list(table.scan(snapshot_id=snapshot_id).plan_files())
    return (
        {t.file.file_path: t.file for t in tasks},
        {d.file_path: d for t in tasks for d in t.delete_files},
    )


def history(table: Table) -> list[dict[str, Any]]:
    out = []
    for s in table.snapshots():
        p = s.summary.additional_properties if s.summary else {}
        out.append(
            {
                "snapshot_id": s.snapshot_id,
                "committed_at": datetime.fromtimestamp(s.timestamp_ms / 1000, UTC).isoformat(),
                "hour": p.get("recon.hour"),
                "run_id": p.get("recon.run-id"),
                "schema_version": p.get("recon.schema-version"),
                "records": p.get("total-records"),
            }
        )
    return out


def key_texts(key: Column, n: int) -> Column:
    """The `n` texts of a key's text in the merge state (`recon.merge.contributions.pk_key`),
    as an array: what `from_json` reads of it, without
    parsing JSON where the text has no escape (no backslash): then each text is what lies
    between `["`, `","` and `"]` (no text holds a quote, which JSON escapes). `from_json` still
    reads any other text (an escape, a NULL column). Merge-on-read's typed keys of a 1M-key
    hour (its position deletes): 1.25 s against 2.75 s by `from_json` (one run each)."""
    inner = F.substring(key, F.lit(3), F.length(key) - 4)
    parts = F.split(inner, '","') if n > 1 else F.array(inner)
    plain = ~key.contains("\\") & key.startswith('["') & key.endswith('"]')
    if n == 1:
        plain &= ~inner.contains('","')
    else:
        plain &= F.size(parts) == n
    return F.when(plain, parts).otherwise(F.from_json(key, "array<string>"))
