"""Publishing reconciled tables as Apache Iceberg tables through pyiceberg (contract 4).

Spark writes the data files; pyiceberg commits them. Each table is identity-partitioned by its
state bucket (`_cdc_bucket`), so an hour's commit removes the data files of the buckets it
touched and adds their replacements in one OVERWRITE snapshot: a reader sees the previous
version or the new one, never a mix, and earlier snapshots stay readable for time travel and
rollback. Snapshot properties carry the pipeline, hour, run id and schema version.

The catalog is pyiceberg's SQL catalog on SQLite under the warehouse unless the pipeline's
`catalog:` names another (any pyiceberg catalog: PostgreSQL via SQL, REST, Hive, Glue).
Tables are named `<pipeline>.<db>.<table>`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from recon.config import PipelineConfig
from recon.core.schema import TableSchema, cast_expr, spark_type, widens
from recon.core.values import INTEGER_LOGICAL
from recon.errors import ReconError
from recon.faults import checkpoint

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyspark.sql import DataFrame, SparkSession

# integers published as decimal(20,0) (BIGINT UNSIGNED) are still integers in an export
INTEGER_TYPES = INTEGER_LOGICAL
META_COLUMNS = ["_cdc_order_key", "_cdc_source_ts", "_cdc_op", "_cdc_bucket"]


def catalog_properties(cfg: PipelineConfig) -> dict[str, str]:
    if cfg.catalog:
        return dict(cfg.catalog)
    return {
        "type": "sql",
        "uri": f"sqlite:///{cfg.warehouse}/catalog.db",
        "warehouse": f"file://{cfg.warehouse}/iceberg",
    }


def get_catalog(cfg: PipelineConfig) -> Catalog:
    from pyiceberg.catalog import load_catalog

    props = catalog_properties(cfg)
    if props.get("type") == "sql" and props.get("uri", "").startswith("sqlite:///"):
        Path(props["uri"][len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    return load_catalog(props.pop("name", "recon"), **props)


def identifier(cfg: PipelineConfig, table: str) -> tuple[str, str, str]:
    db, tbl = table.split(".", 1)
    return (cfg.name, db, tbl)


def load_table(cfg: PipelineConfig, table: str) -> Table:
    from pyiceberg.exceptions import NoSuchTableError

    if table not in cfg.tables:
        raise ReconError(
            f"table {table} is not configured in {cfg.source_file}; use one of {', '.join(cfg.tables)}"
        )
    try:
        return get_catalog(cfg).load_table(identifier(cfg, table))
    except NoSuchTableError:
        raise ReconError(
            f"table {table} of pipeline {cfg.name} is not published yet; run `recon run` first"
        ) from None


def _local(uri: str) -> Path:
    u = urlparse(uri)
    return Path(u.path) if u.scheme in ("file", "") else Path(uri)


def _spark_type_of_iceberg(t: Any) -> str | None:
    from pyiceberg import types as IT

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
    run_id: str,
    replace_all: bool = False,
) -> dict[str, Any]:
    """Write the live rows of the touched buckets and commit them in one Iceberg snapshot."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.expressions import In
    from pyiceberg.table import TableProperties
    from pyiceberg.table import _parquet_files_to_data_files as to_data_files
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    cat = get_catalog(cfg)
    ident = identifier(cfg, name)
    try:
        table = cat.load_table(ident)
        created = False
    except NoSuchTableError:
        table = None
        created = True
    # the published type of each column: the schema's, unless the table already has another
    # that cannot be promoted to it (then values are cast to what readers already see)
    existing: dict[str, str] = {}
    if table is not None:
        for f in table.schema().fields:
            st = _spark_type_of_iceberg(f.field_type)
            if st:
                existing[f.name] = st
    cols = []
    exprs: list[str] = []
    for c, lt in schema.columns:
        want = spark_type(lt)
        esc = c.replace("\\", "\\\\").replace("'", "\\'")
        have = existing.get(c)
        if have and not widens(have, want):
            expr = (
                f"try_cast(row['{esc}'] as {have})"
                if have not in ("string", "binary")
                else (
                    f"row['{esc}']"
                    if have == "string"
                    else f"try_to_binary(row['{esc}'], 'base64')"
                )
            )
        else:
            expr = cast_expr(f"row['{esc}']", lt)
        exprs.append(expr)
        cols.append(F.expr(expr).alias(c))
    uncastable, dup_keys = (
        _written_row_checks(live, touched, schema, exprs) if touched or replace_all else ({}, 0)
    )
    typed = live.select(
        *cols,
        F.lower(F.hex("order_key")).alias("_cdc_order_key"),
        F.timestamp_millis("event_time_ms").alias("_cdc_source_ts"),
        F.col("op").alias("_cdc_op"),
        F.col("bucket").cast("int").alias("_cdc_bucket"),
    )
    import pyarrow as pa

    arrow_schema = pa.schema(
        [f.with_nullable(True) for f in to_arrow_schema(typed.schema, timezone="UTC")]
    )
    if table is None:
        cat.create_namespace_if_not_exists(ident[:2])
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
        table = cat.load_table(ident)
    missing = [f.name for f in arrow_schema if f.name not in existing and not created]
    if not touched and not missing and not replace_all:
        return {
            "committed": False,
            "snapshot_id": _current_id(table),
            "files_added": 0,
            "files_removed": 0,
        }

    out = _local(table.location()) / "data" / f"run={run_id}"
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")  # not INT96
    (
        typed.where(F.col("_cdc_bucket").isin(touched) if touched else F.lit(False))
        .withColumn("_pb", F.col("_cdc_bucket"))
        .repartition("_pb")
        .write.mode("overwrite")
        .partitionBy("_pb")
        .parquet(str(out))
    )
    new_files = sorted(str(p) for p in out.glob("_pb=*/*.parquet"))
    checkpoint("publish:files-written")
    tx = table.transaction()
    tx.set_properties({"recon.logical-types": json.dumps(dict(schema.columns))})
    if missing:
        with tx.update_schema() as us:
            us.union_by_name(arrow_schema)
    if replace_all:
        old = [t.file for t in table.scan().plan_files()]
    elif touched:
        in_touched = In("_cdc_bucket", set(touched))  # type: ignore[call-arg,arg-type]
        old = [t.file for t in table.scan(row_filter=in_touched).plan_files()]
    else:
        old = []
    with tx.update_snapshot(snapshot_properties=props).overwrite() as ow:
        for df in old:
            ow.delete_data_file(df)
        for df in to_data_files(tx.table_metadata, new_files, table.io):
            ow.append_data_file(df)
    tx.commit_transaction()
    table = cat.load_table(ident)
    return {
        "committed": True,
        "snapshot_id": _current_id(table),
        "files_added": len(new_files),
        "files_removed": len(old),
        "table": ".".join(ident),
        "uncastable": uncastable,
        "duplicate_keys": dup_keys,
    }


def _written_row_checks(
    live: DataFrame, touched: list[int], schema: TableSchema, exprs: list[str]
) -> tuple[dict[str, int], int]:
    """Over the rows written this hour, in one pass: values the source sent that do not fit the
    column's published type (published as NULL, counted per column so the loss is never
    silent), and duplicate primary keys (must be 0)."""
    from pyspark.sql import functions as F

    rows = live.where(F.col("bucket").isin(touched)) if touched else live
    checks = []
    for (c, _), expr in zip(schema.columns, exprs, strict=True):
        esc = c.replace("\\", "\\\\").replace("'", "\\'")
        bad = F.expr(f"row['{esc}']").isNotNull() & F.expr(expr).isNull()
        checks.append(F.sum(F.when(bad, 1).otherwise(0)).alias(c))
    dup = (F.count("*") - F.count_distinct("key")) if schema.primary_key else F.lit(0)
    got = rows.agg(dup.alias("_recon_dup_keys"), *checks).first()
    if got is None:
        return {}, 0
    return {c: int(got[c]) for c, _ in schema.columns if got[c]}, int(got["_recon_dup_keys"] or 0)


def _current_id(table: Table) -> int | None:
    snap = table.current_snapshot()
    return snap.snapshot_id if snap else None


def snapshot_for_hour(table: Table, hour: str) -> int:
    """The last snapshot committed for `hour` or before it (hours compare as text)."""
    best = None
    for s in table.snapshots():
        h = (s.summary.additional_properties if s.summary else {}).get("recon.hour")
        if h is not None and h <= hour and (best is None or s.timestamp_ms >= best.timestamp_ms):
            best = s
    if best is None:
        raise ReconError(f"no published version of {'.'.join(table.name())} at or before {hour}")
    return int(best.snapshot_id)


def restore_version(cfg: PipelineConfig, name: str, hour: str) -> dict[str, Any]:
    """Make the table's current version the one published for `hour` (or the last before it),
    as a new commit that swaps the current files for that version's: readers see the old or the
    restored version, and every version, the undone ones too, stays in the history."""
    table = load_table(cfg, name)
    try:
        target: int | None = snapshot_for_hour(table, hour)
    except ReconError:  # published only after `hour`: the table had no rows then
        target = None
    current = _current_id(table)
    if current == target:
        return {"table": name, "snapshot_id": current, "restored_from": target, "committed": False}
    keep = (
        {t.file.file_path: t.file for t in table.scan(snapshot_id=target).plan_files()}
        if target is not None
        else {}
    )
    now = {t.file.file_path: t.file for t in table.scan().plan_files()}
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
    with tx.update_snapshot(snapshot_properties=props).overwrite() as ow:
        for path, df in now.items():
            if path not in keep:
                ow.delete_data_file(df)
        for path, df in keep.items():
            if path not in now:
                ow.append_data_file(df)
    tx.commit_transaction()
    table = load_table(cfg, name)
    return {
        "table": name,
        "snapshot_id": _current_id(table),
        "restored_from": target,
        "committed": True,
    }


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


# -- export (contract 5.2) ----------------------------------------------------------------------
def render_value(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, float):
        return v
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, datetime):
        frac = f".{v.microsecond:06d}" if v.microsecond else ""
        if v.tzinfo is not None:
            return v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"
        return v.strftime("%Y-%m-%d %H:%M:%S") + frac
    if isinstance(v, date):
        return v.isoformat()
    return str(v)


def export_rows(
    cfg: PipelineConfig,
    name: str,
    with_metadata: bool = False,
    snapshot_id: int | None = None,
    hour: str | None = None,
) -> Iterator[dict[str, Any]]:
    """The published rows of one table (a version by snapshot id or hour), sorted by key."""
    table = load_table(cfg, name)
    if hour is not None:
        snapshot_id = snapshot_for_hour(table, hour)
    if snapshot_id is None and table.current_snapshot() is None:
        return
    data = table.scan(snapshot_id=snapshot_id).to_arrow()
    pk = json.loads(table.properties.get("recon.primary-key", "[]"))
    logical = json.loads(table.properties.get("recon.logical-types", "{}"))
    ints = {c for c, t in logical.items() if t in INTEGER_TYPES}
    import pyarrow as pa

    floats32 = {f.name for f in data.schema if pa.types.is_float32(f.type)}
    cols = [f.name for f in data.schema if with_metadata or not f.name.startswith("_cdc_")]
    keys = [c for c in pk if c in data.column_names] or [
        c for c in cols if not c.startswith("_cdc_")
    ]
    if data.num_rows:
        data = data.sort_by(
            [(c, "ascending") for c in keys if _sortable(data.schema.field(c).type)]
        )
    for batch in data.select(cols).to_batches(max_chunksize=10_000):
        for row in batch.to_pylist():
            yield {
                k: int(v)
                if k in ints and isinstance(v, Decimal)
                else _float32(v)
                if k in floats32 and v is not None
                else render_value(v)
                for k, v in row.items()
            }


def _float32(v: float) -> float:
    """A FLOAT column's value as its shortest decimal (0.1, not 0.10000000149011612)."""
    import numpy as np

    return float(np.format_float_positional(np.float32(v), unique=True, trim="-"))


def _sortable(t: Any) -> bool:
    import pyarrow as pa

    return not (pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_struct(t))


def write_export(rows: Iterator[dict[str, Any]], out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, separators=(", ", ": ")) + "\n")
            n += 1
    tmp.replace(out)
    return n
