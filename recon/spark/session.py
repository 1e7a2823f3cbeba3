"""Spark sessions for `recon` commands and spark-submit jobs."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyspark import SparkConf, SparkContext, StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from recon.errors import ConfigError, ReconError
from recon.spark.py4j_lookups import cache_jvm_lookups
from recon.sparkconf import DEFAULTED, REQUIRED_SQL, cluster_conf, session_conf
from recon.sparkpath import DAEMON_MODULE, overwritten_pyspark


def get_spark(app_name: str = "recon", master: str | None = None, jvm: str = "") -> SparkSession:
    """The session: spark-submit's when launched by it (its settings kept), else a local one on
    this machine built with `recon.sparkconf` (defaults sized from the machine, then
    `RECON_SPARK_CONF`).

    Spark's Python workers run `python3` from PATH unless told otherwise, which outside the venv
    lacks our dependencies: point them at this interpreter. `jvm`: a local session's driver
    JVM options for the run's size (`recon.ops.sizing.run_jvm_options`).
    """
    if SparkContext._active_spark_context is None and (broken := overwritten_pyspark()):
        raise ReconError(broken)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    cache_jvm_lookups()  # PySpark's class and method lookups, asked once (`py4j_lookups`)
    # Under spark-submit the JVM is already up (PYSPARK_GATEWAY_PORT) with the submitted conf.
    local = bool(master) or "PYSPARK_GATEWAY_PORT" not in os.environ
    builder = SparkSession.builder.appName(app_name)
    conf: dict[str, str] = {}
    if local:
        master = master or os.environ.get("RECON_SPARK_MASTER", "local[*]")
        builder = builder.master(master)
        try:
            conf = session_conf(local=True, jvm=jvm)
        except ValueError as err:  # RECON_SPARK_CONF
            raise ConfigError(str(err)) from None
        jars = jdbc_jars()
        if jars:
            conf.setdefault("spark.jars", ",".join(jars))
    starting = SparkContext._active_spark_context is None  # else its conf stays as it is
    if starting and not local:
        SparkContext._ensure_initialized()  # connects to spark-submit's JVM
        submitted = SparkConf()  # what spark-submit set
        conf = {k: v for k, v in submitted.getAll() if k in (DAEMON_CONF, PYTHON_CONF)}
        master = submitted.get("spark.master", "")
    if starting and _daemon_here(master or "", conf):
        conf[DAEMON_CONF] = DAEMON_MODULE
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    for key, value in REQUIRED_SQL.items():
        spark.conf.set(key, value)
    spark.sparkContext.setLogLevel(os.environ.get("RECON_SPARK_LOG_LEVEL", "ERROR"))
    return spark


DAEMON_CONF = "spark.python.daemon.module"
PYTHON_CONF = "spark.pyspark.python"


def _daemon_here(master: str, conf: dict[str, str]) -> bool:
    """Spark's Python daemon can be `recon.sparkpath` (pyspark imported from its installed
    package, not spark-submit's zip): the workers run on this machine (a local master), with
    this interpreter, and no daemon of the user's is set (`conf`: the session's settings)."""
    python = conf.get(PYTHON_CONF) or os.environ.get("PYSPARK_PYTHON", "")
    return (
        master.startswith("local")
        and DAEMON_CONF not in conf
        and DAEMON_CONF not in cluster_conf()
        and os.path.realpath(python) == os.path.realpath(sys.executable)
    )


@contextmanager
def job_named(spark: SparkSession, text: str) -> Iterator[None]:
    """Spark jobs started inside are described as `text` (the Spark UI's job list and the
    event log the profile reads: writes have no Python call site of their own)."""
    sc = spark.sparkContext
    sc.setJobDescription(text)
    try:
        yield
    finally:
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]


def kept_as_rows(df: DataFrame) -> DataFrame:
    """`df` computed once, by the first job that reads it, and kept on local disk as rows (a
    local checkpoint) for the jobs after it; `release` frees it. Spark's cache (`persist`)
    keeps a DataFrame as columns, and building the columns of the merge's contributions (their
    images are maps) cost more than computing them (500k-change DataWorks hour, warm: the
    contributions, their counts and the fold 8.0-8.3 s cached, 6.5-7.1 s kept as rows). Unlike
    a cache, a kept copy is not computed again when an executor holding part of it is lost:
    the job fails, and the stage's retry runs it again (local mode loses no executor)."""
    return df.localCheckpoint(eager=False, storageLevel=StorageLevel.DISK_ONLY)


def release(df: DataFrame) -> None:
    """Free what `kept_as_rows` kept (else freed only once the JVM's garbage collector finds
    it unreferenced: in an application shared by stages and runs, maybe hours later); a
    cached DataFrame is unpersisted."""
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)
    else:
        df.unpersist()


WHOLE_STAGE_CODEGEN = "spark.sql.codegen.wholeStage"
CODEGEN_FACTORY_MODE = "spark.sql.codegen.factoryMode"
ADAPTIVE = "spark.sql.adaptive.enabled"
SMALL_HOUR_CONF = {
    WHOLE_STAGE_CODEGEN: "false",
    CODEGEN_FACTORY_MODE: "NO_CODEGEN",
    ADAPTIVE: "false",
}
"""What a small hour's queries run with: no Java source generated and compiled, neither for a
whole stage nor for an expression (projections, predicates, orderings are interpreted); and
no adaptive execution: a query is planned once, and one with shuffles runs as one Spark job
of several stages, not a job per stage, each stage's end re-planning the rest."""
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
SMALL_HOUR_BYTES = 8 * 1024 * 1024
"""Below this much input (dump bytes for decode; about 20k records), a stage runs its queries
without code generation."""
SMALL_HOUR_ROWS = 20_000


@contextmanager
def sized_for(spark: SparkSession, small: bool) -> Iterator[None]:
    """Spark compiles Java source for each of a stage's ~20 queries (whole-stage code
    generation) and, with that off, still for each expression it evaluates (each projection,
    predicate and ordering: 372 classes, each compiled by Janino, in the demo's merge of three
    hours). That pays over many rows and wastes seconds of CPU on a small hour (measured on 2
    cores: a 2k-message hour 27 s -> 22 s end to end without whole-stage code generation; a
    100k-message hour the same either way). Both are off inside this block for a `small` hour
    (`SMALL_HOUR_CONF`), each unless the user set it.

    So is adaptive execution, which pays where there is something to adapt to (slices to merge,
    a join to turn into a broadcast, a skewed slice to split) and otherwise plans each query
    again at each shuffle, as a Spark job per stage: the records an earlier hour read, written
    beside the staging copy, took seven jobs. Measured on 2 cores, the demo's six pipelines'
    three hours one after the other in one process: 368 Spark jobs without it against 631,
    and 108.6 / 122.9 / 125.3 s against 125.0 / 126.9 / 127.7 s, alternating. A small hour's
    shuffles have one slice per core (below), so there is none to merge; where the user set
    more slices, adaptive execution stays on to merge the empty ones.

    A small hour's shuffles also get one slice per core, not our default's 64 (which serves a
    big hour): adaptive execution merges empty slices back, but not those of a cached plan's
    exchange (a snapshot's first hour ran three jobs of 65 tasks for 11 rows), nor the files a
    write of the hour's state splits into."""
    conf = spark.conf
    mine: dict[str, str] = {}
    if small:  # a big hour runs with the application's settings: nothing to ask or set
        user, ours = _started_with(spark.sparkContext)
        cores = max(1, spark.sparkContext.defaultParallelism)  # executors may join: ask each time
        mine = {k: v for k, v in SMALL_HOUR_CONF.items() if k not in user}
        slices = int(conf.get(SHUFFLE_PARTITIONS) or 200)
        ours_to_set = SHUFFLE_PARTITIONS not in user or SHUFFLE_PARTITIONS in ours
        if ours_to_set and cores < slices:
            slices = cores
            mine[SHUFFLE_PARTITIONS] = str(cores)
        if slices > cores:  # slices the user chose: adaptive execution merges the empty ones
            mine.pop(ADAPTIVE, None)
    with sql_conf(spark, mine):
        yield


@contextmanager
def sql_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """The session's runtime `settings` set inside the block; once it ends, each is as it was
    before (unset again where it was unset)."""
    conf = spark.conf
    before: dict[str, str | None] = {k: conf.get(k, None) for k in settings}
    for k, v in settings.items():
        conf.set(k, v)
    try:
        yield
    finally:
        for k, old in before.items():
            if old is None:
                conf.unset(k)
            else:
                conf.set(k, old)


def _started_with(sc: SparkContext) -> tuple[frozenset[str], frozenset[str]]:
    """Of the keys `sized_for` may set, those the application was started with, and which of
    its properties are our defaults (`DEFAULTED`). Fixed for the application's life, so
    asked once (kept on the context): `getConf()` copies every property over Py4J, ~140 calls,
    at each stage's hour."""
    got: tuple[frozenset[str], frozenset[str]] | None = getattr(sc, "_recon_started", None)
    if got is None:
        jconf = sc._jsc.sc().conf()
        got = (
            frozenset(k for k in [*SMALL_HOUR_CONF, SHUFFLE_PARTITIONS] if jconf.contains(k)),
            frozenset(jconf.get(DEFAULTED, "").split(",")),
        )
        sc._recon_started = got  # type: ignore[attr-defined]
    return got


def arrow_ddl(schema: Any) -> str:
    """An Arrow schema as the Spark DDL `mapInArrow` and `createDataFrame` take."""
    return str(from_arrow_schema(schema).simpleString())[len("struct<") : -1]


# Debian's JDBC drivers (libmariadb-java, libpostgresql-jdbc-java), for `recon reconcile`
_DEBIAN_JARS = ("/usr/share/java/mariadb-java-client.jar", "/usr/share/java/postgresql.jar")


def jdbc_jars() -> list[str]:
    """JDBC driver jars for the session: RECON_JDBC_JARS (comma-separated) or Debian's."""
    env = os.environ.get("RECON_JDBC_JARS")
    if env is not None:
        return [j for j in env.split(",") if j]
    return [j for j in _DEBIAN_JARS if os.path.exists(j)]
