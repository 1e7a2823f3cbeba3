"""Spark sessions for `recon` commands and spark-submit jobs."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from recon.errors import ConfigError
from recon.sparkconf import REQUIRED_SQL, session_conf


def get_spark(
    app_name: str = "recon", master: str | None = None, small: bool = False
) -> SparkSession:
    """The session: spark-submit's when launched by it (its settings kept), else a local one on
    this machine built with `recon.sparkconf` (defaults sized from the machine, then
    `RECON_SPARK_CONF`).

    Spark's Python workers run `python3` from PATH unless told otherwise, which outside the venv
    lacks our dependencies: point them at this interpreter. `small`: a local session for a
    small run (`recon.ops.sizing.small_run`).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Under spark-submit the JVM is already up (PYSPARK_GATEWAY_PORT) with the submitted conf.
    local = bool(master) or "PYSPARK_GATEWAY_PORT" not in os.environ
    builder = SparkSession.builder.appName(app_name)
    if local:
        builder = builder.master(master or os.environ.get("RECON_SPARK_MASTER", "local[*]"))
        try:
            conf = session_conf(local=True, small=small)
        except ValueError as err:  # RECON_SPARK_CONF
            raise ConfigError(str(err)) from None
        jars = jdbc_jars()
        if jars:
            conf.setdefault("spark.jars", ",".join(jars))
        for key, value in conf.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    for key, value in REQUIRED_SQL.items():
        spark.conf.set(key, value)
    spark.sparkContext.setLogLevel(os.environ.get("RECON_SPARK_LOG_LEVEL", "ERROR"))
    return spark


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


WHOLE_STAGE_CODEGEN = "spark.sql.codegen.wholeStage"
SMALL_HOUR_BYTES = 8 * 1024 * 1024
"""Below this much input (dump bytes for decode; about 20k records), a stage runs its queries
without whole-stage code generation."""
SMALL_HOUR_ROWS = 20_000


@contextmanager
def sized_for(spark: SparkSession, small: bool) -> Iterator[None]:
    """Whole-stage code generation compiles Java source for each of a stage's ~20 queries: it
    pays over many rows and wastes seconds of CPU on a small hour (measured on 2 cores: a
    2k-message hour 27 s -> 22 s end to end without it; a 100k-message hour the same either
    way). Off inside this block for a `small` hour, unless the user set it."""
    conf = spark.conf
    if not small or spark.sparkContext.getConf().contains(WHOLE_STAGE_CODEGEN):
        yield
        return
    before = conf.get(WHOLE_STAGE_CODEGEN)
    conf.set(WHOLE_STAGE_CODEGEN, "false")
    try:
        yield
    finally:
        conf.set(WHOLE_STAGE_CODEGEN, before or "true")


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
