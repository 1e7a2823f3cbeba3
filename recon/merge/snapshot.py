"""The out-of-band snapshot (contract 2.2): its files, its watermark, and its rows as state
contributions with the empty order key (so any change of the stream wins over them)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recon.config import PipelineConfig
from recon.core.schema import TableSchema
from recon.core.values import INTEGER_LOGICAL
from recon.core.watermark import Watermark, watermark_from_doc
from recon.errors import ConfigError, ReconError
from recon.merge.contributions import row_key
from recon.merge.manifest import snapshot_objects
from recon.objstore import local_copies


def copy_snapshot(cfg: PipelineConfig, names: list[str]) -> None:
    """A snapshot on S3 (`snapshot_uri`): its `_watermark.json` and the folders of tables
    `names` copied to `snapshot_path`, the files not copied yet (`local_copies`)."""
    if cfg.snapshot_uri is None:
        return
    assert cfg.snapshot_path is not None
    if not names and (cfg.snapshot_path / "_watermark.json").is_file():
        return  # every table loaded it; its watermark is copied: nothing to list every hour
    files = snapshot_objects(cfg.snapshot_uri, names, watermark=True)
    local_copies(list(files), cfg.layout.object_mirror, files)


def load_watermark(snapshot_path: Path) -> Watermark:
    """The snapshot's `_watermark.json` (a clear error when missing or not JSON)."""
    path = snapshot_path / "_watermark.json"
    if not path.is_file():
        raise ConfigError(
            f"{path}: missing; an out-of-band snapshot needs its consistent point, e.g. "
            '{"gtid_set": "uuid:1-100"} or {"binlog": {"file": "mysql-bin.000003", "pos": 154}}'
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ConfigError(f"{path}: not valid JSON ({err}); fix the file") from None
    return watermark_from_doc(doc, str(path))


def read_snapshot_folder(spark: SparkSession, folder: Path) -> DataFrame | None:
    """One table of an out-of-band snapshot (Parquet, CSV with a header, or JSON Lines read as
    text); None when the folder is missing or empty."""
    if not folder.is_dir():
        return None
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(("_", ".")))
    kinds = {p.suffix for p in files} - {".crc"}
    if not files:
        return None
    paths = [str(p) for p in files]
    if kinds <= {".parquet"}:
        return spark.read.parquet(*paths)
    if kinds <= {".csv"}:
        return spark.read.option("header", True).csv(paths)
    if kinds <= {".jsonl", ".json"}:
        return spark.read.option("primitivesAsString", True).json(paths)
    raise ReconError(
        f"{folder}: snapshot files must all be .parquet, .csv or .jsonl (found "
        f"{', '.join(sorted(kinds))}); convert or move the others"
    )


def snapshot_rows(
    spark: SparkSession,
    cfg: PipelineConfig,
    schemas: dict[str, TableSchema],
    wm: Watermark,
    names: list[str],
) -> DataFrame | None:
    """The snapshot rows of `names` as contributions (state columns but `bucket`), or None."""
    assert cfg.snapshot_path is not None
    frames = []
    for name in names:
        df = read_snapshot_folder(spark, cfg.snapshot_path / name)
        if df is not None:
            frames.append(_table_rows(df, name, schemas[name], _taken_at_ms(wm)))
    if not frames:
        return None
    out = frames[0]
    for other in frames[1:]:
        out = out.unionByName(other)
    return out


def _table_rows(df: DataFrame, name: str, s: TableSchema, taken_at_ms: int | None) -> DataFrame:
    typed = {f.name: logical_of_spark(f.dataType) for f in df.schema.fields}
    s.observe([f.name for f in df.schema.fields], typed, "snapshot")
    logical = {f.name: s.logical(f.name) or "unknown" for f in df.schema.fields}
    row = event_image([(f.name, column(f.name), f.dataType) for f in df.schema.fields], logical)
    pk = s.primary_key
    out = df.select(row.alias("row")).select(
        F.lit(name).alias("table"),
        (F.to_json(F.array(*[F.col("row")[c] for c in pk])) if pk else row_key(F.col("row"))).alias(
            "key"
        ),
        "row",
    )
    rn = F.row_number().over(Window.partitionBy("key").orderBy("key"))
    return out.select(
        "table",
        "key",
        F.encode(F.concat(F.lit("#snapshot:"), rn.cast("string")), "UTF-8").alias("ident"),
        F.lit(bytearray()).cast("binary").alias("order_key"),
        F.lit(1).alias("sign"),
        "row",
        F.lit(taken_at_ms).cast("bigint").alias("event_time_ms"),
        F.lit("snapshot").alias("op"),
    )


def column(name: str) -> Column:
    """The column named `name`, whatever characters the name holds."""
    return F.col("`" + name.replace("`", "``") + "`")


def event_image(columns: list[tuple[str, Column, Any]], logical: dict[str, str]) -> Column:
    """A row of typed values (name, value, its Spark type) as the map of canonical texts an
    event would carry (recon.core.values), each read in its column's logical type."""
    vals: list[Column] = []
    for name, c, dt in columns:
        vals += [F.lit(name), _canonical(c, dt, logical.get(name) or "unknown")]
    return F.create_map(*vals)


def _taken_at_ms(wm: Watermark) -> int | None:
    """The snapshot's `taken_at` as the source time of its rows (None when absent/unreadable)."""
    if not wm.taken_at:
        return None
    try:
        dt = datetime.fromisoformat(wm.taken_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


_LOGICAL_OF_SPARK: tuple[tuple[type, str], ...] = (
    (T.ByteType, "int32"),
    (T.ShortType, "int32"),
    (T.IntegerType, "int32"),
    (T.LongType, "int64"),
    (T.FloatType, "float32"),
    (T.DoubleType, "float64"),
    (T.BooleanType, "bool"),
    (T.BinaryType, "binary"),
    (T.DateType, "date"),
    (T.TimestampNTZType, "datetime"),
    (T.TimestampType, "timestamp"),
)


def logical_of_spark(dt: Any) -> str:
    """The logical type (`recon.core.values`) a typed snapshot column has."""
    if isinstance(dt, T.DecimalType):
        return f"decimal({dt.precision},{dt.scale})"
    for spark_type, logical in _LOGICAL_OF_SPARK:
        if isinstance(dt, spark_type):
            return logical
    return "unknown"


def _canonical(c: Column, dt: Any, lt: str) -> Column:
    """A typed value as the canonical text an event would carry (recon.core.values)."""
    if isinstance(dt, T.BinaryType):
        return F.base64(c)
    if isinstance(dt, T.BooleanType):  # an integer column read as one (MySQL's TINYINT(1))
        yes, no = ("1", "0") if lt in INTEGER_LOGICAL else ("true", "false")
        return F.when(c, F.lit(yes)).when(~c, F.lit(no))
    if isinstance(dt, (T.TimestampType, T.TimestampNTZType)) or (
        isinstance(dt, T.StringType) and lt in ("datetime", "timestamp")
    ):
        return _temporal_text(c, dt, lt)
    if isinstance(dt, T.StringType) and lt.startswith("decimal("):
        return F.coalesce(c.try_cast(lt).cast("string"), c)
    if isinstance(dt, T.StringType) and lt in INTEGER_LOGICAL:
        return F.coalesce(c.try_cast("decimal(38,0)").cast("string"), c)
    if isinstance(dt, T.DateType):
        return F.date_format(c, "yyyy-MM-dd")
    return c.cast("string")


def _temporal_text(c: Column, dt: Any, lt: str) -> Column:
    ts = (
        c.cast("timestamp_ntz")
        if not isinstance(dt, T.StringType)
        else F.regexp_replace(c, "Z$", "").try_cast("timestamp_ntz")
    )
    text = F.regexp_replace(F.date_format(ts, "yyyy-MM-dd HH:mm:ss.SSSSSS"), r"\.?0+$", "")
    text = F.when(ts.isNull(), c.cast("string")).otherwise(text)
    return F.concat(F.regexp_replace(text, " ", "T"), F.lit("Z")) if lt == "timestamp" else text
