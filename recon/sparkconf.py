"""Spark settings for every way the stages run (stdlib only: the DAG file imports it).

One place, one order: the project's defaults, sized from this machine for local Spark; then
`RECON_SPARK_CONF` (a JSON object of Spark properties), which reaches `recon run`, `recon demo`
and the DAGs' spark-submit tasks alike; then, for a job launched by spark-submit, whatever
spark-submit or the `spark_default` connection set, which the session never overrides.
"""

from __future__ import annotations

import json
import os
import sys

_HELP = 'set it to a JSON object of Spark properties, e.g. {"spark.driver.memory": "8g"}'
GIB = 1024**3


def user_spark_conf() -> dict[str, str]:
    """`RECON_SPARK_CONF`: Spark properties for every stage (memory, cores, shuffle partitions,
    or what a YARN or Kubernetes master needs). A bad value is a one-line ValueError."""
    text = os.environ.get("RECON_SPARK_CONF", "").strip()
    if not text:
        return {}
    try:
        conf = json.loads(text)
    except ValueError as err:
        raise ValueError(f"RECON_SPARK_CONF is not JSON ({err}); {_HELP}") from None
    if not isinstance(conf, dict):
        raise ValueError(f"RECON_SPARK_CONF is not a JSON object; {_HELP}")
    return {str(k): str(v) for k, v in conf.items()}


def machine_memory_bytes() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 4 * GIB


def driver_memory(total_bytes: int) -> str:
    """Local Spark runs the executors inside the driver: a third of the machine, 1-8 GiB."""
    gib = max(1, min(8, total_bytes // GIB // 3))
    return f"{gib}g"


# what the stages need to be correct, set on every session (runtime SQL settings)
REQUIRED_SQL: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


def local_defaults() -> dict[str, str]:
    """The defaults of a local session this process starts (sized from the machine)."""
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    return {
        "spark.driver.memory": driver_memory(machine_memory_bytes()),
        # enough slices that a task of a big hour stays small; adaptive execution merges them
        # back for a small hour
        "spark.sql.shuffle.partitions": os.environ.get("RECON_SHUFFLE_PARTITIONS", "64"),
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        # input splits of bounded size: a task holds a slice of a dump file, not the file
        "spark.sql.files.maxPartitionBytes": "64m",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.pyspark.python": python,
        # JDBC readers read DATETIME/TIMESTAMP through the JVM's zone: make it UTC like Spark's
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    }


SUBMIT_DEFAULTS = (
    "spark.driver.memory",
    "spark.sql.shuffle.partitions",
    "spark.sql.files.maxPartitionBytes",
    "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions",
)


def submit_conf() -> dict[str, str]:
    """The `--conf`s of the DAGs' spark-submit tasks: the defaults that make sense wherever the
    driver runs, then `RECON_SPARK_CONF`; the `spark_default` connection adds its own."""
    defaults = local_defaults()
    return {**{k: defaults[k] for k in SUBMIT_DEFAULTS}, **user_spark_conf()}


def session_conf(local: bool) -> dict[str, str]:
    """The properties a new session is built with: defaults (local only), then the user's."""
    return {**(local_defaults() if local else {}), **user_spark_conf()}
