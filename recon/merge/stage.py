"""The `merge` stage of one pipeline-hour: canonical events -> per-key table state -> publish.

State (contract 4, `_state/<pipeline>/merge/`):
- `data/run=<id>/_t=<db.table>/_b=<bucket>/`: the state rows of one key-hash bucket, written by
  the run that last touched it. A row is one contribution: for a table with a primary key, the
  winning change of a key (a live image or a tombstone); for a table without one, every change
  that added (+1) or removed (-1) one copy of a row, kept as a set so re-applying is harmless.
- `manifest.json`: for every table its schema (versioned), its bucket count and, per bucket, the
  folder holding it with row counts and a checksum; the hours applied; the snapshot bootstrap.
  It is replaced atomically after the publish, so a run killed at any point leaves the previous
  manifest (and the previous published version) in force, and re-running converges.

Merge rules (contract 5.1): per key the contribution with the highest order key wins; deletes
and primary-key changes leave tombstones; a table without a key is a multiset whose copies are the
sum of its contributions. Both are max/union folds, so applying hours twice or in any order gives
the same state. An hour rewrites only the buckets its changes touch, so its cost follows the
hour's changes, not the table's size.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recon.config import PipelineConfig
from recon.core.schema import TableSchema, cast_expr
from recon.core.sqlddl import TableDef, apply_alter_table
from recon.core.values import INTEGER_LOGICAL, mysql_logical_type
from recon.core.watermark import Watermark, load_watermark
from recon.decode.stage import StatePaths, spark_ddl
from recon.errors import ReconError
from recon.faults import checkpoint
from recon.hours import format_hour

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

STATE_DDL = (
    "table string, bucket int, key string, ident binary, order_key binary, sign int, "
    "row map<string,string>, event_time_ms bigint, op string"
)
STATE_COLS = [c.split()[0] for c in STATE_DDL.split(", ")]
U64 = 1 << 64


def merge_base(cfg: PipelineConfig) -> Path:
    return StatePaths(cfg.warehouse, cfg.name).base / "merge"


def load_manifest(cfg: PipelineConfig) -> dict[str, Any]:
    p = merge_base(cfg) / "manifest.json"
    if p.is_file():
        return dict(json.loads(p.read_text()))
    return {"version": 0, "hours": [], "snapshot": None, "tables": {}}


def _write_manifest(cfg: PipelineConfig, man: dict[str, Any], name: str = "manifest.json") -> None:
    p = merge_base(cfg) / name
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".manifest.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(man, indent=1, sort_keys=True))
    os.replace(tmp, p)  # atomic on POSIX: readers see the old or the new manifest


# -- keys ---------------------------------------------------------------------------------------
def _pk_key(img: str, pk: Column) -> Column:
    """JSON array of the key columns' canonical text, e.g. `["42"]`."""
    from pyspark.sql import functions as F

    return F.to_json(F.transform(pk, lambda c: F.col(img)[c]))


def row_key(img: Column) -> Column:
    """A whole row as text (non-null columns, sorted by name): the identity of a multiset copy.
    NULL columns are left out, so a row written before an ADD COLUMN matches its later image."""
    from pyspark.sql import functions as F

    nn = F.map_filter(img, lambda k, v: v.isNotNull())
    return F.to_json(F.transform(F.array_sort(F.map_keys(nn)), lambda k: F.array(k, nn[k])))


def _lit_map(d: dict[str, Any]) -> Column:
    from pyspark.sql import functions as F

    if not d:
        return F.create_map().cast("map<string,array<string>>")
    items: list[Column] = []
    for k, v in d.items():
        items += [F.lit(k), F.array(*[F.lit(x) for x in v]).cast("array<string>")]
    return F.create_map(*items)


# -- schema -------------------------------------------------------------------------------------
def _resolve_schemas(
    spark: SparkSession,
    cfg: PipelineConfig,
    man: dict[str, Any],
    events: DataFrame,
    hour: datetime,
    names: list[str],
) -> tuple[dict[str, TableSchema], dict[str, bool]]:
    """Fold the hour's DDL and image columns into the schema of each table merged."""
    from pyspark.sql import functions as F

    schemas: dict[str, TableSchema] = {}
    changed: dict[str, bool] = {}
    for name in names:
        tcfg = cfg.tables[name]
        entry = man["tables"].get(name)
        if entry:
            schemas[name] = TableSchema.from_json(entry["schema"])
            changed[name] = False
        else:
            s = TableSchema(name, primary_key=list(tcfg.primary_key))
            tdef = tcfg.table_def()
            if tdef is not None:
                s.observe(
                    tdef.columns,
                    {c: mysql_logical_type(tdef.types.get(c)) for c in tdef.columns},
                    "config",
                )
                s.primary_key = s.primary_key or list(tdef.primary_key)
                if tcfg.ddl:
                    s.declared = list(tdef.columns)
            schemas[name] = s
            changed[name] = True
    mine = events.where(F.col("table").isin(names))
    for r in (
        mine.where(F.col("op") == "ddl").orderBy("order_key").select("table", "ddl", "db").collect()
    ):
        s = schemas[r["table"]]
        cur = TableDef([c for c, _ in s.columns], {}, list(s.primary_key))
        try:
            res = apply_alter_table(r["ddl"] or "", cur)
        except ValueError:
            res = None
        if res is None:
            continue
        tdef = res[2]
        new = [c for c in tdef.columns if c not in cur.columns]
        if new and s.observe(
            new,
            {c: mysql_logical_type(tdef.types.get(c)) for c in new},
            f"DDL in {format_hour(hour)}",
        ):
            changed[r["table"]] = True
    shapes = (
        mine.where(F.col("op") != "ddl")
        .select(
            "table",
            F.to_json(F.map_keys(F.coalesce("after", "before"))).alias("cols"),
            F.to_json("types").alias("types"),
            F.to_json("pk").alias("pk"),
        )
        .distinct()
        .collect()
    )
    for r in sorted(shapes, key=lambda r: (r["table"], r["cols"] or "", r["types"] or "")):
        s = schemas[r["table"]]
        cols = json.loads(r["cols"] or "[]")
        types = json.loads(r["types"] or "{}")
        if s.observe(cols, types, f"images in {format_hour(hour)}"):
            changed[r["table"]] = True
        pk = json.loads(r["pk"] or "[]")
        if pk and not s.primary_key and not man["tables"].get(r["table"]):
            s.primary_key = pk
    return schemas, changed


# -- snapshot bootstrap -------------------------------------------------------------------------
def _snapshot_rows(
    spark: SparkSession,
    cfg: PipelineConfig,
    schemas: dict[str, TableSchema],
    wm: Watermark,
    names: list[str],
) -> tuple[DataFrame | None, dict[str, int]]:
    """Out-of-band snapshot rows as contributions with the empty order key (first of all)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    assert cfg.snapshot_path is not None
    frames = []
    counts: dict[str, int] = {}
    for name in names:
        df = read_snapshot_folder(spark, cfg.snapshot_path / name)
        if df is None:
            continue
        s = schemas[name]
        typed = {f.name: _logical_of_spark(f.dataType) for f in df.schema.fields}
        s.observe([f.name for f in df.schema.fields], typed, "snapshot")
        vals = []
        for f in df.schema.fields:
            lt = s.logical(f.name) or "unknown"
            vals += [F.lit(f.name), _canonical(f.name, f.dataType, lt, T)]
        pk = s.primary_key
        row = F.create_map(*vals)
        out = df.select(row.alias("row")).select(
            F.lit(name).alias("table"),
            (
                F.to_json(F.array(*[F.col("row")[c] for c in pk])) if pk else row_key(F.col("row"))
            ).alias("key"),
            "row",
        )
        rn = F.row_number().over(Window.partitionBy("key").orderBy("key"))
        out = out.select(
            "table",
            "key",
            F.encode(F.concat(F.lit("#snapshot:"), rn.cast("string")), "UTF-8").alias("ident"),
            F.lit(bytearray()).cast("binary").alias("order_key"),
            F.lit(1).alias("sign"),
            "row",
            F.lit(_taken_at_ms(wm)).cast("bigint").alias("event_time_ms"),
            F.lit("snapshot").alias("op"),
        )
        frames.append(out)
        counts[name] = -1  # filled in by the caller from the state it writes
    if not frames:
        return None, counts
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    return df, counts


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


def _taken_at_ms(wm: Watermark) -> int | None:
    """The snapshot's `taken_at` as the source time of its rows (None when absent/unreadable)."""
    if not wm.taken_at:
        return None
    try:
        dt = datetime.fromisoformat(wm.taken_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        from datetime import UTC

        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def _logical_of_spark(dt: Any) -> str:
    from pyspark.sql import types as T

    if isinstance(dt, (T.ByteType, T.ShortType, T.IntegerType)):
        return "int32"
    if isinstance(dt, T.LongType):
        return "int64"
    if isinstance(dt, T.DecimalType):
        return f"decimal({dt.precision},{dt.scale})"
    if isinstance(dt, T.FloatType):
        return "float32"
    if isinstance(dt, T.DoubleType):
        return "float64"
    if isinstance(dt, T.BooleanType):
        return "bool"
    if isinstance(dt, T.BinaryType):
        return "binary"
    if isinstance(dt, T.DateType):
        return "date"
    if isinstance(dt, T.TimestampNTZType):
        return "datetime"
    if isinstance(dt, T.TimestampType):
        return "timestamp"
    return "unknown"


def _canonical(name: str, dt: Any, lt: str, T: Any) -> Column:
    """A snapshot value as the canonical text an event would carry (recon.core.values)."""
    from pyspark.sql import functions as F

    q = "`" + name.replace("`", "``") + "`"
    c = F.col(q)

    frac = "yyyy-MM-dd HH:mm:ss.SSSSSS"
    if isinstance(dt, T.BinaryType):
        return F.base64(c)
    if isinstance(dt, T.BooleanType):
        return F.when(c, F.lit("true")).when(~c, F.lit("false"))
    if isinstance(dt, (T.TimestampType, T.TimestampNTZType)) or (
        isinstance(dt, T.StringType) and lt in ("datetime", "timestamp")
    ):
        ts = (
            c.cast("timestamp_ntz")
            if not isinstance(dt, T.StringType)
            else F.expr(f"try_cast(regexp_replace({q}, 'Z$', '') as timestamp_ntz)")
        )
        text = F.regexp_replace(F.date_format(ts, frac), r"\.?0+$", "")
        text = F.when(ts.isNull(), c.cast("string")).otherwise(text)
        return F.concat(F.regexp_replace(text, " ", "T"), F.lit("Z")) if lt == "timestamp" else text
    if isinstance(dt, T.StringType) and lt.startswith("decimal("):
        return F.coalesce(F.expr(f"try_cast({q} as {lt})").cast("string"), c)
    if isinstance(dt, T.StringType) and lt in INTEGER_LOGICAL:
        return F.coalesce(F.expr(f"try_cast({q} as decimal(38,0))").cast("string"), c)
    if isinstance(dt, T.DateType):
        return F.date_format(c, "yyyy-MM-dd")
    return c.cast("string")


# -- the stage ----------------------------------------------------------------------------------
def route_expr(cfg: PipelineConfig) -> Column:
    """The published table an event belongs to: the first table whose `from:` matches its
    source `db.table` (config order), else the source table itself."""
    from pyspark.sql import functions as F

    src = F.concat_ws(".", "db", "tbl")
    out: Column | None = None
    for name, t in cfg.tables.items():
        for pattern in t.sources:
            regex = "^" + re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".") + "$"
            cond = src.rlike(regex)
            out = F.when(cond, F.lit(name)) if out is None else out.when(cond, F.lit(name))
    return src if out is None else out.otherwise(src)


def merge_hour(
    spark: SparkSession,
    cfg: PipelineConfig,
    hour: datetime,
    run_id: str | None = None,
    buckets: int = 16,
    publish: bool = True,
    tables: list[str] | None = None,
) -> dict[str, Any]:
    """Merge one decoded hour into the state and publish every configured table, or only
    `tables` (the other tables' changes of the hour are counted as not merged; merging them
    later, in any order, gives the same state). `publish=False`: state only, for tests."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from recon.core.model import EVENT_SCHEMA
    from recon.publish.iceberg import publish_table

    run_id = run_id or uuid.uuid4().hex[:12]
    paths = StatePaths(cfg.warehouse, cfg.name)
    H = format_hour(hour)
    names = check_tables(cfg, tables)
    if not paths.counters(hour).is_file():
        raise ReconError(
            f"hour {H} of pipeline {cfg.name} is not decoded yet; run `recon decode --hour {H}` "
            "(or `recon run`) first"
        )
    man = load_manifest(cfg)
    ev_dir = paths.events(hour)
    if ev_dir.is_dir() and any(ev_dir.glob("*.parquet")):
        events = spark.read.parquet(str(ev_dir))
    else:
        events = spark.createDataFrame([], spark_ddl(EVENT_SCHEMA))
    events = events.withColumn("table", route_expr(cfg)).persist(StorageLevel.MEMORY_AND_DISK)
    by_table_op: dict[str, dict[str, int]] = {}
    for r in events.groupBy("table", "op").agg(F.count("*").alias("n")).collect():
        by_table_op.setdefault(r["table"], {})[r["op"]] = int(r["n"])
    not_configured = {
        t: sum(n for op, n in ops.items() if op != "ddl")
        for t, ops in by_table_op.items()
        if t not in cfg.tables
    }
    not_merged = {t: ops for t, ops in by_table_op.items() if t in cfg.tables and t not in names}
    schemas, schema_changed = _resolve_schemas(spark, cfg, man, events, hour, names)

    ev = events.where(F.col("table").isin(names) & (F.col("op") != "ddl"))
    wm: Watermark | None = load_watermark(cfg.snapshot_path) if cfg.snapshot_path else None
    skipped_wm: dict[str, int] = {}
    not_comparable: dict[str, int] = {}
    if wm is not None:
        ev = ev.withColumn("_wm", F.expr(wm.sql()))
        for r in ev.groupBy("table", "_wm").agg(F.count("*").alias("n")).collect():
            if r["_wm"] is True:
                skipped_wm[r["table"]] = int(r["n"])
            elif r["_wm"] is None:
                not_comparable[r["table"]] = int(r["n"])
        ev = ev.where(~F.coalesce(F.col("_wm"), F.lit(False))).drop("_wm")

    pks = {n: s.primary_key for n, s in schemas.items()}
    nb = {n: int(man["tables"].get(n, {}).get("buckets") or buckets) for n in names}
    ev = ev.withColumn("_pk", _lit_map(pks)[F.col("table")])
    has_pk = F.size("_pk") > 0
    common: list[Column | str] = [F.col("order_key").alias("ident"), "order_key"]
    full_before = F.forall("_pk", lambda c: F.map_contains_key(F.col("before"), c))
    moved = F.col("after").isNull() | (
        _pk_key("before", F.col("_pk")) != _pk_key("after", F.col("_pk"))
    )
    parts = [
        ev.where(has_pk & F.col("after").isNotNull()).select(
            "table",
            _pk_key("after", F.col("_pk")).alias("key"),
            *common,
            F.lit(1).alias("sign"),
            F.col("after").alias("row"),
            "event_time_ms",
            "op",
        ),
        ev.where(
            has_pk
            & F.col("before").isNotNull()
            & F.col("op").isin("update", "delete")
            & full_before
            & ((F.col("op") == "delete") | moved)
        ).select(
            "table",
            _pk_key("before", F.col("_pk")).alias("key"),
            *common,
            F.lit(0).alias("sign"),
            F.lit(None).cast("map<string,string>").alias("row"),
            "event_time_ms",
            F.when(F.col("op") == "delete", "delete").otherwise("pk_change").alias("op"),
        ),
        ev.where(
            ~has_pk & F.col("before").isNotNull() & F.col("op").isin("update", "delete")
        ).select(
            "table",
            row_key(F.col("before")).alias("key"),
            *common,
            F.lit(-1).alias("sign"),
            F.col("before").alias("row"),
            "event_time_ms",
            "op",
        ),
        ev.where(~has_pk & F.col("after").isNotNull()).select(
            "table",
            row_key(F.col("after")).alias("key"),
            *common,
            F.lit(1).alias("sign"),
            F.col("after").alias("row"),
            "event_time_ms",
            "op",
        ),
    ]
    contrib = parts[0]
    for p in parts[1:]:
        contrib = contrib.unionByName(p)
    snapshot_info = man.get("snapshot")
    # the snapshot is loaded into a table's state when that state starts (first merge, or
    # the first after a rebuild); states from before per-table tracking count as loaded
    snap_for = [
        n
        for n in names
        if wm is not None
        and not man["tables"].get(n, {}).get("snapshot_loaded")
        and not (snapshot_info is not None and n in man["tables"])
    ]
    if wm is not None and snap_for:
        snap, _ = _snapshot_rows(spark, cfg, schemas, wm, snap_for)
        if snap is not None:
            contrib = contrib.unionByName(snap)
        snapshot_info = {"watermark": wm.to_json(), "loaded_in_hour": H, "run_id": run_id}
    nb_map = F.create_map(*[x for n in names for x in (F.lit(n), F.lit(nb[n]))])
    contrib = contrib.withColumn(
        "bucket", F.pmod(F.xxhash64("key"), nb_map[F.col("table")]).cast("int")
    ).persist(StorageLevel.MEMORY_AND_DISK)

    touched: dict[str, set[int]] = {n: set() for n in names}
    for r in contrib.select("table", "bucket").distinct().collect():
        touched[r["table"]].add(int(r["bucket"]))
    for n in names:  # a schema change rewrites the whole published table
        if schema_changed[n] and n in man["tables"]:
            touched[n] |= {int(b) for b in man["tables"][n]["files"]}

    base = merge_base(cfg)
    old_dirs = [
        str(base / man["tables"][n]["files"][str(b)]["path"])
        for n in names
        if n in man["tables"]
        for b in sorted(touched[n])
        if str(b) in man["tables"][n]["files"]
    ]
    old = (
        spark.read.schema(STATE_DDL).parquet(*old_dirs).select(*STATE_COLS)
        if old_dirs
        else spark.createDataFrame([], STATE_DDL)
    )
    # skips by reason, per table: changes older than what the state holds for their key
    # (stale), or already in it (a re-run of an hour: same order key, or same multiset copy)
    ms_tables = [n for n in names if not pks[n]]
    is_ms = F.col("table").isin(ms_tables) if ms_tables else F.lit(False)
    olds = old.where(~is_ms & (F.col("sign") >= 0)).select(
        "table", "key", F.col("order_key").alias("old_ok")
    )
    # one "main" contribution per event (a PK change's tombstone and a multiset update's -1
    # copy ride along), so skips and applies count events; out-of-band snapshot rows are apart
    main = contrib.where(
        (F.col("op") != "pk_change")
        & ((F.col("sign") != -1) | (F.col("op") == "delete"))
        & (F.length("order_key") > 0)
    )
    cmp = (
        main.where(~is_ms)
        .join(olds, ["table", "key"], "inner")
        .groupBy("table")
        .agg(
            F.sum(F.when(F.col("order_key") < F.col("old_ok"), 1).otherwise(0)).alias("stale"),
            F.sum(F.when(F.col("order_key") == F.col("old_ok"), 1).otherwise(0)).alias("again"),
        )
    )
    stale = {r["table"]: (int(r["stale"] or 0), int(r["again"] or 0)) for r in cmp.collect()}
    if ms_tables:
        ms_again = (
            main.where(is_ms)
            .join(old.where(is_ms), ["table", "key", "ident", "sign"], "left_semi")
            .groupBy("table")
            .agg(F.count("*").alias("n"))
            .collect()
        )
        for r in ms_again:
            stale[r["table"]] = (0, int(r["n"]))

    allc = old.unionByName(contrib.select(*STATE_COLS))
    pk_state = (
        allc.where(~is_ms)
        .groupBy("table", "bucket", "key")
        .agg(F.max_by(F.struct(*STATE_COLS), F.struct("order_key", "sign")).alias("w"))
        .select("w.*")
    )
    ms_state = allc.where(is_ms).dropDuplicates(["table", "bucket", "key", "ident", "sign"])
    new_state = pk_state.unionByName(ms_state)
    # one folder per (run, hour): a run that merges several hours (a DAG run over a range)
    # must not overwrite the files an earlier hour of it published
    run_dir = base / "data" / f"run={run_id}" / f"hour={H}"
    (
        new_state.withColumn("_t", F.col("table"))
        .withColumn("_b", F.col("bucket"))
        .repartition("_t", "_b")
        .write.mode("overwrite")
        .partitionBy("_t", "_b")
        .parquet(str(run_dir))
    )
    checkpoint("merge:state-written")
    state = spark.read.schema(STATE_DDL).parquet(str(run_dir)).select(*STATE_COLS)
    live = live_rows(state, ms_tables).persist(StorageLevel.MEMORY_AND_DISK)
    bstats: dict[tuple[str, int], dict[str, Any]] = {}
    for r in (
        live.groupBy("table", "bucket")
        .agg(
            F.count("*").alias("rows"),
            F.sum(F.xxhash64(row_key(F.col("row"))).cast("decimal(38,0)")).alias("ck"),
        )
        .collect()
    ):
        bstats[(r["table"], int(r["bucket"]))] = {
            "rows": int(r["rows"]),
            "checksum": int(r["ck"] or 0),
        }
    for r in state.groupBy("table", "bucket").agg(F.count("*").alias("n")).collect():
        bstats.setdefault((r["table"], int(r["bucket"])), {"rows": 0, "checksum": 0})[
            "state_rows"
        ] = int(r["n"])
    ops_applied: dict[str, dict[str, int]] = {}  # events that entered the merge, by op
    pk_changed: dict[str, int] = {}
    snapshot_loaded: dict[str, int] = {}
    for r in (
        contrib.groupBy("table", "op", (F.length("order_key") == 0).alias("oob"))
        .agg(
            F.count("*").alias("n"),
            F.sum(F.when((F.col("sign") != -1) | (F.col("op") == "delete"), 1).otherwise(0)).alias(
                "main"
            ),
        )
        .collect()
    ):
        t = r["table"]
        if r["oob"]:
            snapshot_loaded[t] = snapshot_loaded.get(t, 0) + int(r["n"])
        elif r["op"] == "pk_change":
            pk_changed[t] = int(r["n"])
        elif r["main"]:
            ops_applied.setdefault(t, {})[r["op"]] = int(r["main"])

    new_man = json.loads(json.dumps(man))
    tables_out: dict[str, Any] = {}
    for n in names:
        s = schemas[n]
        entry = new_man["tables"].setdefault(n, {"buckets": nb[n], "files": {}})
        if n in snap_for:
            entry["snapshot_loaded"] = True
        rows_before = sum(int(f["rows"]) for f in entry["files"].values())
        for b in sorted(touched[n]):
            st = bstats.get((n, b))
            if st is None or "state_rows" not in st:
                entry["files"].pop(str(b), None)
                continue
            entry["files"][str(b)] = {
                "path": str((run_dir / f"_t={n}" / f"_b={b}").relative_to(base)),
                "rows": st["rows"],
                "state_rows": st["state_rows"],
                "checksum": str(st["checksum"] % U64),
                "run_id": run_id,
                "hour": H,
            }
        entry["schema"] = s.to_json()
        files = entry["files"]
        pub = (
            {"committed": False, "snapshot_id": None}
            if not publish
            else publish_table(
                spark,
                cfg,
                n,
                s,
                live.where(F.col("table") == n),
                sorted(touched[n]),
                {
                    "recon.pipeline": cfg.name,
                    "recon.hour": H,
                    "recon.run-id": run_id,
                    "recon.schema-version": str(s.version),
                },
                f"{run_id}/hour={H}",
                replace_all=n not in man["tables"],
            )
        )
        tables_out[n] = {
            "rows_before": rows_before,
            "rows_after": sum(int(f["rows"]) for f in files.values()),
            "checksum": str(sum(int(f["checksum"]) for f in files.values()) % U64),
            "changes_by_op": dict(
                sorted((k, v) for k, v in by_table_op.get(n, {}).items() if k != "ddl")
            ),
            "entered_by_op": dict(sorted(ops_applied.get(n, {}).items())),
            "applied": sum(ops_applied.get(n, {}).values()) - sum(stale.get(n, (0, 0))),
            "pk_changes": pk_changed.get(n, 0),
            "snapshot_rows_loaded": snapshot_loaded.get(n, 0),
            "skipped": {
                "below_snapshot_watermark": skipped_wm.get(n, 0),
                "stale": stale.get(n, (0, 0))[0],
                "already_applied": stale.get(n, (0, 0))[1],
            },
            "not_comparable_to_watermark": not_comparable.get(n, 0),
            "ddl_seen": int(by_table_op.get(n, {}).get("ddl", 0)),
            "schema_version": s.version,
            "schema_changed": bool(schema_changed[n]),
            "buckets_touched": len(touched[n]),
            "buckets": nb[n],
            "primary_key": s.primary_key,
            "published": pub,
        }
    checkpoint("merge:published")
    new_man["version"] = int(man.get("version", 0)) + 1
    new_man["hours"] = sorted(set(man.get("hours", [])) | {H})
    new_man["snapshot"] = snapshot_info
    new_man["last_run"] = {"run_id": run_id, "hour": H}
    _write_manifest(cfg, new_man)
    _write_manifest(cfg, new_man, f"manifests/hour={H}.json")  # for `recon rollback`
    for d in (events, contrib, live):
        d.unpersist()
    out = paths.base / "merge" / "hours" / f"hour={H}.json"
    if tables is not None and out.is_file():  # keep what earlier merges of this hour did
        earlier = json.loads(out.read_text())["tables"]
        tables_out = {**{t: v for t, v in earlier.items() if t not in names}, **tables_out}
    result = {
        "pipeline": cfg.name,
        "hour": H,
        "run_id": run_id,
        "tables": dict(sorted(tables_out.items())),
        "merged_tables": names,
        "not_merged": {
            t: sum(n for op, n in ops.items() if op != "ddl")
            for t, ops in sorted(not_merged.items())
            if t not in tables_out
        },
        "ddl_not_merged": sum(
            ops.get("ddl", 0) for t, ops in not_merged.items() if t not in tables_out
        ),
        "not_configured": dict(sorted(not_configured.items())),
        "ddl_not_configured": sum(
            ops.get("ddl", 0) for t, ops in by_table_op.items() if t not in cfg.tables
        ),
        "snapshot": snapshot_info,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str))
    return result


def check_tables(cfg: PipelineConfig, tables: list[str] | None) -> list[str]:
    """The tables a merge covers: all configured ones, or the subset asked for (validated)."""
    if not tables:
        return list(cfg.tables)
    unknown = [t for t in tables if t not in cfg.tables]
    if unknown:
        raise ReconError(
            f"table {unknown[0]} is not in pipeline {cfg.name}; choose from {', '.join(cfg.tables)}"
        )
    return [t for t in cfg.tables if t in tables]  # config order


def reset_state(cfg: PipelineConfig, tables: list[str] | None = None) -> dict[str, Any]:
    """Forget the merge state of every table (or of `tables`): the next merge of each starts it
    again from the snapshot and replaces the whole published table (a new Iceberg snapshot; the
    earlier versions stay readable by time travel). Decoded hours are kept. Atomic, like a merge:
    a run killed after this just rebuilds again."""
    names = check_tables(cfg, tables)
    man = load_manifest(cfg)
    new = json.loads(json.dumps(man))
    for n in names:
        new["tables"].pop(n, None)
    if not new["tables"]:
        new["hours"], new["snapshot"] = [], None
    new["version"] = int(man.get("version", 0)) + 1
    new["reset"] = {"tables": names, "version_before": man.get("version", 0)}
    _write_manifest(cfg, new)
    return new


def rollback_state(cfg: PipelineConfig, hour: datetime) -> dict[str, Any]:
    """Make the merge state what it was after `hour` was last merged (its saved manifest; the
    bucket folders it names are never rewritten). Later hours leave the state: merging them
    again brings them back. Atomic like a merge."""
    H = format_hour(hour)
    saved = merge_base(cfg) / "manifests" / f"hour={H}.json"
    if not saved.is_file():
        raise ReconError(
            f"no saved merge state for hour {H} of pipeline {cfg.name} (not merged, or merged "
            f"before states were kept per hour); `recon rebuild --to {H}` gives the same tables"
        )
    old = json.loads(saved.read_text())
    base = merge_base(cfg)
    for t in old["tables"].values():
        for f in t["files"].values():
            if not (base / f["path"]).is_dir():
                raise ReconError(
                    f"the merge state of hour {H} lost {base / f['path']}; "
                    f"`recon rebuild --to {H}` gives the same tables"
                )
    cur = load_manifest(cfg)
    new = {
        **old,
        "version": int(cur.get("version", 0)) + 1,
        "hours": [h for h in old.get("hours", []) if h <= H],
        "rolled_back": {"to_hour": H, "version_before": cur.get("version", 0)},
    }
    _write_manifest(cfg, new)
    return new


def decoded_hours(cfg: PipelineConfig, last: datetime) -> list[datetime]:
    """The decoded hours from the pipeline's start through `last`, in order."""
    from recon.hours import hour_range

    paths = StatePaths(cfg.warehouse, cfg.name)
    return (
        [h for h in hour_range(cfg.start, last) if paths.counters(h).is_file()]
        if last >= cfg.start
        else []
    )


def live_rows(state: DataFrame, ms_tables: list[str]) -> DataFrame:
    """The published rows of state rows: live keys; multiset copies repeated by multiplicity."""
    from pyspark.sql import functions as F

    is_ms = F.col("table").isin(ms_tables) if ms_tables else F.lit(False)
    pk_live = state.where(~is_ms & (F.col("sign") == 1)).select(
        "table", "bucket", "key", "row", "order_key", "event_time_ms", "op"
    )
    ms = (
        state.where(is_ms)
        .groupBy("table", "bucket", "key")
        .agg(
            F.sum("sign").alias("n"),
            F.max_by(
                F.when(F.col("sign") > 0, F.col("row")), F.when(F.col("sign") > 0, F.col("ident"))
            ).alias("row"),
            F.max(F.when(F.col("sign") > 0, F.col("order_key"))).alias("order_key"),
            F.max(F.when(F.col("sign") > 0, F.col("event_time_ms"))).alias("event_time_ms"),
            F.max_by(
                F.when(F.col("sign") > 0, F.col("op")),
                F.when(F.col("sign") > 0, F.col("order_key")),
            ).alias("op"),
        )
        .where(F.col("n") > 0)
        .withColumn("_copy", F.explode(F.sequence(F.lit(1), F.col("n"))))
        .select("table", "bucket", "key", "row", "order_key", "event_time_ms", "op")
    )
    return pk_live.unionByName(ms)


def typed_columns(schema: TableSchema) -> list[tuple[str, str]]:
    """(column, SQL producing its published value from `row`) in schema order."""
    out = []
    for c, lt in schema.columns:
        esc = c.replace("'", "\\'")
        out.append((c, cast_expr(f"row['{esc}']", lt)))
    return out
