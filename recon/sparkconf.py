"""Spark settings for every way the stages run (stdlib only: the DAG file imports it).

One place, one order: the project's defaults, sized from this machine for local Spark; then
`RECON_SPARK_CONF` (a JSON object of Spark properties), which reaches `recon run`, `recon demo`
and the DAGs' spark-submit tasks alike; then, for a job launched by spark-submit, whatever
spark-submit, the cluster's `spark-defaults.conf` or the `spark_default` connection set: the
session never overrides them, and the DAGs pass a default only where `spark-defaults.conf` has
none.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

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


CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2: bytes, or "max"
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # v1: bytes, a huge number for none
)
"""Where a container's memory limit is read (`machine_memory_bytes`)."""


def machine_memory_bytes(limits: tuple[Path, ...] = CGROUP_LIMITS) -> int:
    """The memory this process may use: the machine's, or its container's limit (cgroup) when
    lower (a worker container of 8 GiB on a 64 GiB host sized its heap from the host's)."""
    try:
        total = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        total = 4 * GIB
    for f in limits:
        try:
            text = f.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            return int(text)
    return total


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


QUICK_JIT_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
"""A run of under 2.5M records (`recon.ops.sizing.run_jvm_options`; a million until session
61, whose measurements are in that module's doc): the JVM
compiles with the quick JIT compiler only (C1). The optimising one (C2) spent 31-44 s of
compile time on every 500k-message hour, while the whole run took 40-60 s on 2 cores: a core
taken from the tasks for most of the run, for code that pays back only over more rows.
Measured in session 31, fresh `recon run`s of the bench's 500k-message hours, alternating:
DataWorks 35.3 / 34.8 / 38.5 / 34.6 s against 42.8 / 39.9 / 49.7 / 40.2 s, Debezium 52.9 /
50.4 against 60.6 / 59.8 s, Tencent 50.2 / 49.8 against 54.3 / 53.7 s; a 2M-message DataWorks
hour the other way, 83.9 / 87.3 against 69.5 / 74.0 / 75.2 s; at 1M messages the two are
equal (69.1 / 58.3 against 70.0 / 56.9 s). The code cache is the size
tiered compilation has (the quick compiler alone gets 48 MB, too little for an application
that serves many hours)."""

SMALL_RUN_JVM_OPTIONS = f"{QUICK_JIT_JVM_OPTIONS} -XX:+UseSerialGC -XX:CompileThresholdScaling=3"
"""A small run's JVM compiles with the quick JIT compiler only, a method after three times the
calls that would have compiled it before, into a code cache of the size tiered compilation has
(the quick compiler alone gets 48 MB: the demo's six pipelines' hours in one application
compiled 42 MB, and near full its sweeper spent ~8 CPU-seconds a demo throwing methods out to
compile them again); it collects garbage in one thread, without G1's concurrent threads
(`recon.ops.sizing`)."""
JVM_OPTIONS = "-Duser.timezone=UTC"

CDS_ARCHIVE = Path(sys.prefix) / "share" / "recon" / "spark-classes.jsa"
"""Spark's classes as a class-data-sharing archive, built by setup (`recon.spark.class_archive`)."""
CDS_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # a JVM that cannot map it says nothing


def cds_jvm_options(archive: Path = CDS_ARCHIVE) -> str:
    """The driver JVM options that map the class archive, or "" when setup built none."""
    return f" -XX:SharedArchiveFile={archive} {CDS_QUIET}" if archive.is_file() else ""


def local_defaults(jvm: str = "") -> dict[str, str]:
    """The defaults of a local session this process starts (sized from the machine); `jvm`:
    the driver JVM options for the run's size (`recon.ops.sizing.run_jvm_options`)."""
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    driver_jvm = JVM_OPTIONS + cds_jvm_options()
    driver_jvm += f" {jvm}" if jvm else ""
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
        "spark.driver.extraJavaOptions": driver_jvm,
        "spark.executor.extraJavaOptions": JVM_OPTIONS,
    }


STANDALONE_CORES_MAX = "2"
"""`spark.cores.max` of a stage's application on a standalone cluster: without it the first
application takes every core and the other pipelines' wait (local and YARN ignore it)."""


SUBMIT_DEFAULTS = (
    "spark.driver.memory",
    "spark.cores.max",
    "spark.sql.shuffle.partitions",
    "spark.sql.files.maxPartitionBytes",
    "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions",
)


def cluster_conf() -> dict[str, str]:
    """What the cluster's `spark-defaults.conf` sets (`SPARK_CONF_DIR`, else `SPARK_HOME/conf`):
    spark-submit reads it, and a `--conf` of ours would override it."""
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME") else ""
    )
    path = os.path.join(conf_dir, "spark-defaults.conf") if conf_dir else ""
    out: dict[str, str] = {}
    if not path or not os.path.isfile(path):
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.strip().replace("=", " ", 1).split(None, 1)
            if parts and not parts[0].startswith("#"):
                out[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return out


DEFAULTED = "spark.recon.defaulted"
"""The properties a session or spark-submit took from our defaults (comma-separated): a small
hour may tune those (`recon.spark.session.sized_for`); a value the user or the cluster set is
kept as it is."""


def _with_defaults(defaults: dict[str, str]) -> dict[str, str]:
    """`defaults` (less what the cluster's `spark-defaults.conf` sets), then the user's
    properties, and which of the result's properties are ours (`DEFAULTED`)."""
    defaults, user = _not_set_by_cluster(defaults), user_spark_conf()
    ours = sorted(k for k in defaults if k not in user)
    return {**defaults, **user, **({DEFAULTED: ",".join(ours)} if ours else {})}


def submit_conf(python: str | None = None, run_jvm: str = "") -> dict[str, str]:
    """The `--conf`s of the DAGs' spark-submit tasks: the defaults that make sense wherever the
    driver runs (and `python` for the Python workers), each only where the cluster's
    `spark-defaults.conf` sets nothing; then `RECON_SPARK_CONF`, which wins. `run_jvm`: text
    appended to our driver JVM options (the DAGs: a template that adds the options for the
    size of the stage's hours)."""
    local = local_defaults() | {"spark.cores.max": STANDALONE_CORES_MAX}
    defaults = {k: local[k] for k in SUBMIT_DEFAULTS}
    defaults["spark.driver.extraJavaOptions"] += run_jvm
    if python:
        defaults |= {"spark.pyspark.python": python, "spark.pyspark.driver.python": python}
    return _with_defaults(defaults)


def session_conf(local: bool, jvm: str = "") -> dict[str, str]:
    """The properties a new session is built with: defaults (local only, and only where
    `spark-defaults.conf` sets nothing), then the user's."""
    return _with_defaults(local_defaults(jvm) if local else {})


def _not_set_by_cluster(defaults: dict[str, str]) -> dict[str, str]:
    cluster = cluster_conf()
    return {k: v for k, v in defaults.items() if k not in cluster}
