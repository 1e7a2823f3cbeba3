"""Spark sessions for `recon` commands and spark-submit jobs."""

from __future__ import annotations

import os
import sys
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema


def get_spark(app_name: str = "recon", master: str | None = None) -> SparkSession:
    """The session: spark-submit's when launched by it, else a local one on this machine.

    Spark's Python workers run `python3` from PATH unless told otherwise, which outside the venv
    lacks our dependencies: point them at this interpreter.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit the JVM is already up (PYSPARK_GATEWAY_PORT) with the submitted master.
    if master or "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(master or os.environ.get("RECON_SPARK_MASTER", "local[*]"))
    builder = (
        builder.config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", os.environ.get("RECON_SHUFFLE_PARTITIONS", "8"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
        # JDBC readers read DATETIME/TIMESTAMP through the JVM's zone: make it UTC like Spark's
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
    )
    jars = jdbc_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("RECON_SPARK_LOG_LEVEL", "ERROR"))
    return spark


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
