"""`recon reconcile`: compare a published table with its source, row for row, cheaply.

The source is (a) an out-of-band snapshot taken later (`<path>/<db>.<table>/` + `_watermark.json`)
or (b) the live database over JDBC (MariaDB/MySQL through Debian's `libmariadb-java`, or any
driver on the session's class path), read at its current point (`@@gtid_binlog_pos` /
`@@gtid_executed` when the server tells it).

Both sides are rendered to the same canonical text per column, hashed per row, and summed per
key-hash bucket (one scan of each side). Only buckets whose (count, checksum) differ are compared
row by row: rows missing from the table, extra in it, and different, with samples. Keys that the
stream changes after the compared table version (events in later decoded hours, or, for a
snapshot, changes its watermark does not cover) are in flight: reported apart, not mismatches.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from recon.audit.report import AuditReport, load_report, with_findings, write_report
from recon.audit.rules import finding
from recon.audit.table import day_comparison
from recon.config import PipelineConfig
from recon.core.watermark import watermark_from_doc
from recon.errors import ReconError
from recon.hours import format_hour, parse_hour
from recon.layout import has_parquet
from recon.merge.snapshot import column, load_watermark, read_snapshot_folder
from recon.merge.state import checksum_of, checksum_sums
from recon.publish.deletes import read_snapshot_files
from recon.publish.iceberg import load_table, snapshot_at_hour

SAMPLES = 5
_NUMERIC_LOGICAL = ("int", "uint", "decimal", "float", "year")


def _text(name: str, dtype: Any, logical: str) -> Column:
    """One column as canonical text (the same for a published value and a source value)."""
    c = column(name)
    if isinstance(dtype, T.BinaryType):
        return F.base64(c)
    if isinstance(dtype, T.BooleanType):
        return F.when(c, F.lit("1")).when(~c, F.lit("0"))
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        s = F.date_format(c, "yyyy-MM-dd HH:mm:ss.SSSSSS")
        return F.regexp_replace(s, r"\.?0+$", "")
    if isinstance(dtype, T.StringType) and logical in ("datetime", "timestamp"):
        s = F.regexp_replace(F.regexp_replace(c, "T", " "), "Z$", "")
        return F.regexp_replace(s, r"\.?0+$", "")
    s = c.cast("string")
    numeric = isinstance(dtype, T.NumericType) or logical.startswith(_NUMERIC_LOGICAL)
    if numeric:  # 1.50 and 1.5 are one number; so are 7 and 7.00
        s = F.when(
            s.contains("."), F.regexp_replace(F.regexp_replace(s, "0+$", ""), r"\.$", "")
        ).otherwise(s)
    return s


def _canonical(df: DataFrame, cols: list[str], pk: list[str], logical: dict[str, str]) -> DataFrame:
    """(key, h, row, typed) per row: key text, row hash, the row as a text map for samples,
    and its columns as they are (what a repair publishes)."""
    types = {f.name: f.dataType for f in df.schema.fields}
    missing = [c for c in cols if c not in types]
    if missing:
        raise ReconError(
            f"the source has no column(s) {', '.join(missing)} of the published table; compare "
            "a source of the same table"
        )
    texts = {c: _text(c, types[c], logical.get(c, "")) for c in cols}
    row = F.create_map(*[x for c in cols for x in (F.lit(c), texts[c])])
    joined = F.concat_ws("\x1f", *[F.coalesce(texts[c], F.lit("\x00NULL")) for c in cols])
    key = (
        F.to_json(F.array(*[texts[c] for c in pk]))
        if pk
        else joined  # a keyless table: the row is its own key, copies counted
    )
    typed = F.struct(*[column(c) for c in cols])
    return df.select(
        key.alias("key"), F.xxhash64(joined).alias("h"), row.alias("row"), typed.alias("typed")
    )


def _published(spark: SparkSession, cfg: PipelineConfig, name: str, hour: str | None) -> dict:
    table = load_table(cfg, name)
    snap_id = snapshot_at_hour(cfg, name, table, hour) if hour else None
    snap = table.snapshot_by_id(snap_id) if snap_id is not None else table.current_snapshot()
    if snap is None:
        raise ReconError(f"{name} has no published version yet; run the pipeline first")
    props = table.properties
    logical = json.loads(props.get("recon.logical-types", "{}"))
    cols = [f.name for f in table.schema().fields if not f.name.startswith("_cdc_")]
    pk = json.loads(props.get("recon.primary-key", "[]"))
    # the snapshot's rows: its data files, with any position deletes applied
    df = read_snapshot_files(spark, table, cfg.layout.object_mirror, snap.snapshot_id)
    if df is None:
        df = spark.createDataFrame([], "x int")
    for c in cols:
        if c not in df.columns:
            df = df.withColumn(c, F.lit(None).cast("string"))  # added after these files
    return {
        "df": df,
        "cols": cols,
        "pk": pk,
        "logical": logical,
        "snapshot_id": snap.snapshot_id,
        "hour": snap.summary.additional_properties.get("recon.hour") if snap.summary else None,
    }


def _source_snapshot(spark: SparkSession, path: Path, name: str) -> tuple[DataFrame, dict]:
    folder = path / name
    df = read_snapshot_folder(spark, folder)
    if df is None:
        raise ReconError(
            f"{folder}: no snapshot files for {name}; point --snapshot at the folder "
            "holding <db>.<table>/ and _watermark.json"
        )
    wm = load_watermark(path)
    return df, {"kind": "snapshot", "path": str(path), "watermark": wm.to_json(), "_wm": wm}


_USERINFO = re.compile(r"(//)[^/?#]*@")


def shown_url(url: str) -> str:
    """A JDBC URL as reports and messages show it: without its query (where `password=`
    goes) and without `user:password@` (`jdbc:mariadb://u:secret@h:3306/db` ->
    `jdbc:mariadb://h:3306/db`)."""
    return _USERINFO.sub(r"\1", url.split("?")[0])


def _source_jdbc(
    spark: SparkSession, url: str, name: str, user: str | None, password: str | None
) -> tuple[DataFrame, dict]:
    driver = {
        "jdbc:mariadb:": "org.mariadb.jdbc.Driver",
        "jdbc:postgresql:": "org.postgresql.Driver",
    }

    spark_url = url
    if url.startswith("jdbc:mariadb:"):
        # Spark picks its SQL dialect by URL and knows MariaDB only as `jdbc:mysql:` (other
        # URLs get "double-quoted" column names, which MariaDB reads as strings); the MariaDB
        # driver accepts that scheme when told so
        sep = "&" if "?" in url else "?"
        spark_url = "jdbc:mysql:" + url[len("jdbc:mariadb:") :] + sep + "permitMysqlScheme"

    def reader() -> Any:
        r = spark.read.format("jdbc").option("url", spark_url)
        for prefix, cls in driver.items():
            if url.startswith(prefix):
                r = r.option("driver", cls)
        if user is not None:
            r = r.option("user", user)
        if password is not None:
            r = r.option("password", password)
        return r

    db, tbl = name.split(".", 1)
    point: dict[str, Any] = {"kind": "jdbc", "url": shown_url(url)}
    try:
        if url.startswith("jdbc:mariadb:"):
            # the rows of one consistent snapshot, each carrying the snapshot's binlog position
            # as a GTID position (MariaDB: START TRANSACTION WITH CONSISTENT SNAPSHOT), read
            # once and kept: every comparison below reads the same rows at the same point
            df = (
                reader()
                .option("sessionInitStatement", "START TRANSACTION WITH CONSISTENT SNAPSHOT")
                .option("query", _SNAPSHOT_QUERY.format(db=db, tbl=tbl))
                .load()
                .localCheckpoint(eager=True)
            )
            first = df.select(_POS).limit(1).collect()
            point["gtid_set"] = first[0][0] if first else _gtid_pos(reader)
            point["consistent"] = True
            return df.drop(_POS), point
        point["gtid_set"] = _gtid_pos(reader)
        df = reader().option("dbtable", f"`{db}`.`{tbl}`").load().localCheckpoint(eager=True)
    except Exception as err:  # noqa: BLE001 - any driver error is the user's to fix
        first_line = str(err).strip().splitlines()[0][:300]
        raise ReconError(f"cannot read {name} over JDBC ({shown_url(url)}): {first_line}") from None
    return df, point


_POS = "__recon_pos"
_STATUS = (
    "(SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = '{}')"
)
_SNAPSHOT_QUERY = (
    "SELECT t.*, BINLOG_GTID_POS("
    + _STATUS.format("BINLOG_SNAPSHOT_FILE")
    + ", "
    + _STATUS.format("BINLOG_SNAPSHOT_POSITION")
    + f") AS `{_POS}` FROM `{{db}}`.`{{tbl}}` t"
)
"""A MariaDB table's rows with the position of the snapshot they are read in."""


def _gtid_pos(reader: Any) -> str | None:
    """The server's GTID position now (MariaDB; None where it has no such variable)."""
    try:
        pos = reader().option("query", "SELECT @@gtid_binlog_pos AS g").load().first()
    except Exception:  # noqa: BLE001 - MySQL has no such variable; the point stays unknown
        return None
    return pos["g"] if pos else None


def _in_flight(
    spark: SparkSession,
    cfg: PipelineConfig,
    name: str,
    pk: list[str],
    after_hour: str | None,
    wm: Any,
) -> DataFrame | None:
    """Keys (as `key` text) the stream changes after the compared version, or that the source's
    point has not reached: their difference is expected, not a mismatch."""
    root = cfg.layout.state / "events"
    if not root.is_dir() or not pk:
        return None
    db, tbl = name.split(".", 1)
    dirs = sorted(d for d in root.glob("hour=*") if has_parquet(d))
    if not dirs:
        return None
    ev = spark.read.parquet(*[str(d) for d in dirs]).withColumn(
        "_hour", F.regexp_extract(F.input_file_name(), r"hour=([0-9T-]+)", 1)
    )
    ev = ev.where((F.col("db") == db) & (F.col("tbl") == tbl) & (F.col("op") != "ddl"))
    cond = F.lit(False)
    if after_hour is not None:
        cond = cond | (F.col("_hour") > F.lit(after_hour))
    if wm is not None:
        cond = cond | ~F.coalesce(F.expr(wm.sql()), F.lit(False))
    ev = ev.where(cond)
    keys = []
    for img in ("before", "after"):
        keys.append(
            ev.where(F.col(img).isNotNull()).select(
                F.to_json(F.array(*[F.col(img)[c] for c in pk])).alias("key")
            )
        )
    return keys[0].unionByName(keys[1]).distinct()


@dataclass
class Comparison:
    """A table compared with its source: the result (`recon reconcile`'s report), and what a
    repair needs of it (`recon.ops.repair`)."""

    result: dict[str, Any]
    diffs: DataFrame | None
    """The differing rows of a keyed table: key, kind (missing, extra, different, in_flight),
    trow/srow (each side's row as text), ttyped/styped (its columns as they are); None when
    no bucket differs or the table has no key."""
    logical: dict[str, str]
    """The published table's logical column types."""
    pk: list[str]
    """Its primary key (empty: none)."""


def reconcile_table(
    spark: SparkSession,
    cfg: PipelineConfig,
    name: str,
    *,
    snapshot: Path | None = None,
    jdbc: str | None = None,
    user: str | None = None,
    password: str | None = None,
    as_of_hour: str | None = None,
    buckets: int = 64,
) -> dict[str, Any]:
    _check_source(cfg, name, snapshot, jdbc)
    source = (
        _source_snapshot(spark, snapshot, name)
        if snapshot is not None
        else _source_jdbc(spark, str(jdbc), name, user, password)
    )
    return compare_table(spark, cfg, name, source, as_of_hour, buckets).result


def read_source(
    spark: SparkSession,
    cfg: PipelineConfig,
    name: str,
    jdbc: str,
    user: str | None,
    password: str | None,
) -> tuple[DataFrame, dict[str, Any]]:
    """The live source's rows of table `name`, read once, and the point they were read at."""
    _check_source(cfg, name, None, jdbc)
    return _source_jdbc(spark, jdbc, name, user, password)


def compare_table(
    spark: SparkSession,
    cfg: PipelineConfig,
    name: str,
    source: tuple[DataFrame, dict[str, Any]],
    as_of_hour: str | None = None,
    buckets: int = 64,
) -> Comparison:
    """Table `name` (its version of `as_of_hour`, else its current one) against `source`."""
    hour = format_hour(parse_hour(as_of_hour, "--as-of-hour")) if as_of_hour else None
    pub = _published(spark, cfg, name, hour)
    src_df, point = source[0], dict(source[1])
    wm = point.pop("_wm", None)
    cols, pk = pub["cols"], pub["pk"]
    t = _canonical(pub["df"], cols, pk, pub["logical"])
    s = _canonical(src_df, cols, pk, pub["logical"])
    bucket = F.pmod(F.xxhash64("key"), F.lit(buckets)).alias("b")
    t, s = t.select(bucket, "*"), s.select(bucket, "*")

    ts, ss = _bucket_sums(t), _bucket_sums(s)
    differing = sorted(b for b in set(ts) | set(ss) if ts.get(b) != ss.get(b))
    result: dict[str, Any] = {
        "table": name,
        "published_snapshot_id": pub["snapshot_id"],
        "published_hour": pub["hour"],
        "source": point,
        "rows_table": sum(n for n, _ in ts.values()),
        "rows_source": sum(n for n, _ in ss.values()),
        "buckets": buckets,
        "buckets_differing": len(differing),
        "missing": 0,
        "extra": 0,
        "different": 0,
        "in_flight": 0,
        "samples": {"missing": [], "extra": [], "different": []},
    }
    keyed = None
    if differing:
        td = t.where(F.col("b").isin(differing))
        sd = s.where(F.col("b").isin(differing))
        if pk:
            flight = _in_flight(spark, cfg, name, pk, pub["hour"], wm)
            diffs = keyed = _keyed_diffs(td, sd, flight)
        else:
            diffs = _multiset_diffs(td, sd)
        _count_and_sample(diffs, result)
    result["mismatches"] = result["missing"] + result["extra"] + result["different"]
    _judge_pending(spark, cfg, point, result)
    return Comparison(result, keyed, pub["logical"], pk)


def _check_source(cfg: PipelineConfig, name: str, snapshot: Path | None, jdbc: str | None) -> None:
    if name not in cfg.tables:
        raise ReconError(
            f"{name} is not a table of pipeline {cfg.name}; use one of {', '.join(cfg.tables)}"
        )
    if (snapshot is None) == (jdbc is None):
        raise ReconError("give exactly one source: --snapshot DIR or --jdbc URL")


def _judge_pending(
    spark: SparkSession, cfg: PipelineConfig, point: dict[str, Any], result: dict[str, Any]
) -> None:
    """Differences with a source read past the stream decoded so far are pending: the source
    holds changes the stream has not delivered yet, and a difference may be one of them, so
    none is called a mismatch until the hours through its position are decoded."""
    ahead = _source_ahead(spark, cfg, point.get("gtid_set")) if result["mismatches"] else None
    if ahead is not None:
        result["pending"], result["mismatches"] = result["mismatches"], 0
        result["source_ahead"] = ahead


def _source_ahead(spark: SparkSession, cfg: PipelineConfig, gtid_set: str | None) -> dict | None:
    """Where the source's GTID position passes the newest transaction decoded so far (per
    server UUID / MariaDB domain): {"source": ..., "decoded": ...}; None when the decoded
    stream reaches it (or either is unknown)."""
    if not gtid_set:
        return None
    try:
        wm = watermark_from_doc({"gtid_set": gtid_set}, "the source's position")
    except ReconError:
        return None
    decoded = _decoded_gtid_max(spark, cfg)
    behind = {str(d): (seq, decoded.get(str(d), 0)) for d, seq in wm.mariadb.items()} | {
        u: (max(hi for _, hi in ivs), decoded.get(u.lower(), 0)) for u, ivs in wm.mysql.items()
    }
    late = {k: v for k, v in behind.items() if v[0] > v[1]}
    if not late:
        return None
    return {
        "source": gtid_set,
        "decoded": {k: n for k, (_, n) in sorted(late.items())},
        "needed": {k: n for k, (n, _) in sorted(late.items())},
    }


def _decoded_gtid_max(spark: SparkSession, cfg: PipelineConfig) -> dict[str, int]:
    """The newest transaction number decoded per MariaDB domain (`d-s-n`: key `d`) or MySQL
    source (`uuid[:tag]:n`: key `uuid[:tag]`, lower case), over every decoded hour."""
    root = cfg.layout.state / "events"
    dirs = sorted(d for d in root.glob("hour=*") if has_parquet(d)) if root.is_dir() else []
    if not dirs:
        return {}
    g = F.col("gtid")
    mariadb = g.rlike(r"^[0-9]+-[0-9]+-[0-9]+$")
    key = F.when(mariadb, F.split(g, "-")[0]).otherwise(
        F.lower(F.regexp_extract(g, "^(.*):[^:]*$", 1))
    )
    num = F.when(mariadb, F.split(g, "-")[2]).otherwise(F.regexp_extract(g, ":([0-9]+)$", 1))
    ev = spark.read.parquet(*[str(d) for d in dirs]).where(g.isNotNull())
    rows = (
        ev.select(key.alias("k"), num.cast("decimal(20,0)").alias("n"))
        .groupBy("k")
        .agg(F.max("n").alias("n"))
    )
    return {str(r["k"]): int(r["n"]) for r in rows.collect() if r["k"] and r["n"] is not None}


def _bucket_sums(df: DataFrame) -> dict[int, tuple[int, int]]:
    """(rows, checksum) per bucket: one scan."""
    rows = df.groupBy("b").agg(F.count("*").alias("n"), *checksum_sums(F.col("h")))
    return {int(r["b"]): (int(r["n"]), checksum_of(r)) for r in rows.collect()}


def _keyed_diffs(td: DataFrame, sd: DataFrame, flight: DataFrame | None) -> DataFrame:
    """Rows of a keyed table that differ, by kind (in flight apart)."""
    j = (
        td.alias("t")
        .join(sd.alias("s"), "key", "full_outer")
        .select(
            "key",
            F.col("t.h").alias("th"),
            F.col("s.h").alias("sh"),
            F.col("t.row").alias("trow"),
            F.col("s.row").alias("srow"),
            F.col("t.typed").alias("ttyped"),
            F.col("s.typed").alias("styped"),
        )
    )
    j = j.where(F.col("th").isNull() | F.col("sh").isNull() | (F.col("th") != F.col("sh")))
    cls = (
        F.when(F.col("th").isNull(), "missing")
        .when(F.col("sh").isNull(), "extra")
        .otherwise("different")
    )
    j = j.withColumn("kind", cls)
    if flight is not None:
        j = j.join(flight.withColumn("_f", F.lit(True)), "key", "left")
    else:
        j = j.withColumn("_f", F.lit(None).cast("boolean"))
    return j.withColumn("kind", F.when(F.col("_f"), "in_flight").otherwise(F.col("kind")))


def _multiset_diffs(td: DataFrame, sd: DataFrame) -> DataFrame:
    """Rows of a keyless table whose copies differ in number."""
    tc = td.groupBy("key").agg(F.count("*").alias("tn"), F.first("row").alias("trow"))
    sc = sd.groupBy("key").agg(F.count("*").alias("sn"), F.first("row").alias("srow"))
    return (
        tc.join(sc, "key", "full_outer")
        .withColumn("d", F.coalesce("sn", F.lit(0)) - F.coalesce("tn", F.lit(0)))
        .where(F.col("d") != 0)
        .withColumn("kind", F.when(F.col("d") > 0, "missing").otherwise("extra"))
    )


def _count_and_sample(diffs: DataFrame, result: dict[str, Any]) -> None:
    counts = {
        r["kind"]: int(r["n"]) for r in diffs.groupBy("kind").agg(F.count("*").alias("n")).collect()
    }
    for k in ("missing", "extra", "different", "in_flight"):
        result[k] = counts.get(k, 0)
    for k in ("missing", "extra", "different"):
        for r in diffs.where(F.col("kind") == k).limit(SAMPLES).collect():
            result["samples"][k].append(
                {
                    "key": r["key"],
                    "table": dict(r["trow"]) if r["trow"] is not None else None,
                    "source": dict(r["srow"]) if r["srow"] is not None else None,
                }
            )


def attach_to_report(cfg: PipelineConfig, result: dict[str, Any]) -> Path | None:
    """Add the comparison to the report of the compared hour (re-deciding its verdict)."""
    hour_text = result.get("published_hour")
    if not hour_text:
        return None
    hour = parse_hour(hour_text, "hour")
    if not cfg.layout.report(hour).is_file():
        return None
    report = load_report(cfg, hour)
    add_reconcile(report, result)
    return write_report(cfg, hour, report, day_comparison(cfg, hour, report))


def add_reconcile(report: AuditReport, result: dict[str, Any]) -> None:
    """The comparison in the hour's report, and its finding (the verdict decided again): what
    `recon reconcile` adds, and what a later audit of the hour keeps."""
    rec = report.get("reconcile") or {}
    rec[result["table"]] = result
    report["reconcile"] = rec
    new = []
    if result["mismatches"]:
        new.append(
            finding(
                "reconcile_mismatch",
                f"against {result['source']['kind']}: {result['missing']} missing, "
                f"{result['extra']} extra, {result['different']} different rows "
                f"({result['in_flight']} in flight not counted)",
                table=result["table"],
            )
        )
    with_findings(report, "reconcile_mismatch", result["table"], new)
