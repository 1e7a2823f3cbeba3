"""The installed environment works: pyspark's own files (not pyspark-client's) run mapInArrow,
and spark-submit runs the decode job end to end."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from recon.layout import STAGE_JOB
from recon.sparkpath import overwritten_pyspark
from tests.conftest import ROOT


def test_pyspark_is_its_own_version_not_pyspark_clients() -> None:
    import pyspark

    assert pyspark.__version__ == metadata.version("pyspark")


def test_map_in_arrow_runs_in_process(spark) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    def double(batches):  # type: ignore[no-untyped-def]
        for b in batches:
            yield pa.RecordBatch.from_arrays([pc.multiply(b.column(0), 2)], names=["id"])

    rows = spark.range(10).mapInArrow(double, "id long").orderBy("id").collect()
    assert [r.id for r in rows] == [2 * i for i in range(10)]


def test_spark_submit_runs_the_decode_job(tmp_path: Path) -> None:
    from recon.demo import sample
    from recon.demo.demo import write_dump

    h0 = datetime(2026, 11, 20, tzinfo=UTC)
    txns = sample.workload(h0, 1, txns_per_hour=4, seed=2)
    recs = sample.to_records(sample.encode_debezium(txns), "t")
    write_dump(tmp_path / "raw", "t", recs, "parquet", [h0])
    from tests.support.builders import write_pipeline

    cfg = write_pipeline(tmp_path / "p.yaml", name="p", format="debezium_json", topics=["t"])
    venv_bin = Path(sys.executable).parent
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PATH=f"{venv_bin}:{os.environ['PATH']}")
    proc = subprocess.run(
        [
            str(venv_bin / "spark-submit"),
            "--master",
            "local[2]",
            str(STAGE_JOB),
            "decode",
            "--pipeline",
            str(cfg),
            "--from",
            "2026-11-20T00",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    n_changes = sum(len(t.changes) for t in txns)
    assert f"{n_changes} events" in proc.stdout
    assert (tmp_path / "wh" / "_state" / "p" / "decode" / "hour=2026-11-20T00.json").is_file()


def test_jobs_started_inside_job_named_carry_its_description_and_later_ones_do_not(spark) -> None:
    """The stages name their write jobs (Spark UI, the profile's event log) without the name
    leaking onto the jobs that follow, also when the step fails."""
    from recon.spark.session import job_named

    sc = spark.sparkContext
    with job_named(spark, "decode: a named step"):
        assert sc.getLocalProperty("spark.job.description") == "decode: a named step"
        spark.range(5).count()
    assert sc.getLocalProperty("spark.job.description") is None
    try:
        with job_named(spark, "merge: a failing step"):
            raise RuntimeError("step failed")
    except RuntimeError:
        pass
    assert sc.getLocalProperty("spark.job.description") is None


def test_a_small_hours_queries_run_without_code_generation(spark) -> None:
    """`sized_for`: for a small hour, no whole-stage code generation and no Java compiled for
    an expression either (Janino's compile count stays put, and grows outside); both back after,
    also on error; a big hour, or a user who set them, keeps them."""
    from recon.spark.session import CODEGEN_FACTORY_MODE, WHOLE_STAGE_CODEGEN, sized_for

    def codegen() -> str:
        return str(spark.conf.get(WHOLE_STAGE_CODEGEN)).lower()

    metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics

    def compiled(n: int) -> int:
        """Classes Janino compiled for a new query that projects, filters and sorts."""
        before = metrics.METRIC_COMPILATION_TIME().getCount()
        q = spark.range(50).selectExpr(f"id * {n} + 7 as x", f"concat('k', id % {n}) as k")
        q.where(f"x % {n + 3} > 1").orderBy("k", "x").collect()
        return int(metrics.METRIC_COMPILATION_TIME().getCount() - before)

    assert codegen() == "true"
    assert compiled(11) > 0
    with sized_for(spark, small=True):
        assert codegen() == "false"
        assert spark.conf.get(CODEGEN_FACTORY_MODE) == "NO_CODEGEN"
        plan = spark.range(5).selectExpr("id + 1 as x")._jdf.queryExecution().executedPlan()
        assert "WholeStageCodegen" not in plan.toString()
        assert compiled(13) == 0
    assert codegen() == "true"
    assert spark.conf.get(CODEGEN_FACTORY_MODE) == "FALLBACK"
    with sized_for(spark, small=False):
        assert codegen() == "true"
        assert compiled(17) > 0
    try:
        with sized_for(spark, small=True):
            raise RuntimeError("stage failed")
    except RuntimeError:
        pass
    assert codegen() == "true"
    assert spark.conf.get(CODEGEN_FACTORY_MODE) == "FALLBACK"


def test_a_small_hours_query_with_shuffles_is_one_spark_job(spark) -> None:
    """`sized_for`: a small hour's queries run without adaptive execution, so a query with two
    shuffles is one Spark job (adaptive execution runs a job per stage), with the same rows;
    a big hour keeps it; back after; a user who set it keeps their setting."""
    from pyspark.sql import functions as F

    from recon.spark.session import ADAPTIVE, sized_for

    sc = spark.sparkContext

    def jobs(group: str) -> tuple[int, list[tuple[int, int]]]:
        """Spark jobs and rows of a query with two shuffles."""
        sc.setJobGroup(group, group)
        try:
            by_k = spark.range(1000).groupBy((F.col("id") % 7).alias("k")).count()
            rows = by_k.groupBy("count").agg(F.count("*").alias("n")).collect()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        return len(sc.statusTracker().getJobIdsForGroup(group)), sorted(tuple(r) for r in rows)

    assert spark.conf.get(ADAPTIVE) == "true"
    adaptive_jobs, rows = jobs("adaptive")
    assert adaptive_jobs > 1 and rows == [(142, 1), (143, 6)]
    with sized_for(spark, small=True):
        assert spark.conf.get(ADAPTIVE) == "false"
        assert jobs("small") == (1, rows)
    assert spark.conf.get(ADAPTIVE) == "true"
    with sized_for(spark, small=False):
        assert jobs("big") == (adaptive_jobs, rows)
    jconf = spark.sparkContext._jsc.sc().conf()
    jconf.set(ADAPTIVE, "true")  # as if the user had set it
    try:
        _forget_started_with(spark)
        with sized_for(spark, small=True):
            assert spark.conf.get(ADAPTIVE) == "true"
    finally:
        jconf.remove(ADAPTIVE)
        _forget_started_with(spark)


def _forget_started_with(spark) -> None:
    """`sized_for` reads the application's start settings once (they are fixed for its life);
    a test that changes them as if the application had started so must let it read them again."""
    spark.sparkContext.__dict__.pop("_recon_started", None)


def test_sized_for_reads_the_applications_settings_once(spark) -> None:
    """Each stage's hour enters `sized_for`: it asked for the application's whole configuration
    each time (`getConf()`: ~140 Py4J calls); what it needs of it is fixed for the
    application's life, so it is read once."""
    from recon.spark.session import sized_for

    client = spark.sparkContext._gateway._gateway_client
    calls = []
    send = client.send_command

    def counting(command, *args, **kwargs):
        calls.append(command)
        return send(command, *args, **kwargs)

    with sized_for(spark, small=True):
        pass
    gc.collect()  # the Python proxies earlier tests left: freed now, not inside the count
    client.send_command = counting
    try:
        with sized_for(spark, small=True):
            pass
    finally:
        del client.send_command
    # a proxy the garbage collector frees meanwhile tells the JVM (Py4J's memory command,
    # "m\nd\n..."): not a call `sized_for` made
    asked = [c for c in calls if not c.startswith("m\nd\n")]
    assert 0 < len(asked) < 50, (len(asked), len(calls))


def test_a_small_hour_shuffles_into_a_slice_per_core_unless_the_user_chose(spark) -> None:
    """Our default of 64 shuffle slices serves a big hour; a small hour's shuffles get one per
    core (a cached plan's exchange kept all 64: three jobs of 65 tasks for a snapshot of 11
    rows), back after. A count the user or the cluster set (not among `DEFAULTED`) is kept."""
    import re

    from pyspark.sql import functions as F

    from recon.spark.session import SHUFFLE_PARTITIONS, sized_for
    from recon.sparkconf import DEFAULTED

    jconf = spark.sparkContext._jsc.sc().conf()
    assert SHUFFLE_PARTITIONS in jconf.get(DEFAULTED).split(",")
    assert spark.conf.get(SHUFFLE_PARTITIONS) == "64"
    cores = spark.sparkContext.defaultParallelism
    assert cores == 2
    with sized_for(spark, small=True):
        assert spark.conf.get(SHUFFLE_PARTITIONS) == "2"
        df = spark.range(100).groupBy((F.col("id") % 7).alias("k")).count()
        plan = df._jdf.queryExecution().toString()
        assert re.search(r"hashpartitioning\(\w+#\d+L?, 2\)", plan), plan
        assert df.count() == 7
    assert spark.conf.get(SHUFFLE_PARTITIONS) == "64"
    with sized_for(spark, small=False):
        assert spark.conf.get(SHUFFLE_PARTITIONS) == "64"
    ours = jconf.get(DEFAULTED)
    jconf.set(DEFAULTED, ours.replace(SHUFFLE_PARTITIONS, "x"))  # as if the user had set it
    try:
        _forget_started_with(spark)
        with sized_for(spark, small=True):
            assert spark.conf.get(SHUFFLE_PARTITIONS) == "64"
            # the user's 64 slices: adaptive execution stays on to merge the empty ones
            assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
    finally:
        jconf.set(DEFAULTED, ours)
        _forget_started_with(spark)


def test_driver_jvms_map_the_class_archive_setup_built(tmp_path: Path) -> None:
    """Setup builds Spark's classes into a class-data-sharing archive (`recon.spark.class_archive`) and
    the driver options name it; `-Xshare:on` makes a JVM that cannot map it (stale for this JDK
    or these jars, or not there) fail to start instead of running without it."""
    from recon.sparkconf import CDS_ARCHIVE, local_defaults

    assert CDS_ARCHIVE.is_file(), "no class archive: `make setup` builds it"
    driver = local_defaults()["spark.driver.extraJavaOptions"]
    assert f"-XX:SharedArchiveFile={CDS_ARCHIVE}" in driver
    job = tmp_path / "job.py"
    job.write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "print('rows', spark.range(3).count())\n"
    )
    venv_bin = Path(sys.executable).parent
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PATH=f"{venv_bin}:{os.environ['PATH']}")
    proc = subprocess.run(
        [str(venv_bin / "spark-submit"), "--master", "local[1]", "--conf",
         f"spark.driver.extraJavaOptions={driver} -Xshare:on", str(job)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0 and "rows 3" in proc.stdout, proc.stderr[-2000:]


def test_setup_sees_pyspark_intact_so_it_keeps_the_jars_the_archive_is_for(
    tmp_path: Path,
) -> None:
    """Setup reinstalls pyspark only when pyspark-client's files are over its own
    (`recon.sparkpath.overwritten_pyspark`, which also stops `recon` before Spark starts): an
    unconditional reinstall rewrote the jars at every `make setup`, and the JVM then refused
    the class archive (built for the jars as they were) without a word. Here: this venv is
    intact; a site folder whose pyspark files are 4.2.0's under 4.3.0's record is not."""
    assert overwritten_pyspark() is None
    (tmp_path / "pyspark").mkdir()
    (tmp_path / "pyspark" / "__init__.py").write_text("")
    (tmp_path / "pyspark" / "version.py").write_text("__version__: str = '4.2.0'\n")
    (tmp_path / "pyspark-4.3.0.dist-info").mkdir()
    said = overwritten_pyspark([str(tmp_path)])
    assert said is not None and said.endswith("--force-reinstall --no-deps pyspark==4.3.0`")
    (tmp_path / "pyspark" / "version.py").write_text("__version__: str = '4.3.0'\n")
    assert overwritten_pyspark([str(tmp_path)]) is None


def test_setup_run_again_installs_nothing_while_what_pins_the_dependencies_is_unchanged() -> None:
    """The pip steps (~8 s: a new editable wheel every time) run only when constraints.txt,
    pyproject.toml or setup.sh changed since the install the stamp records (or the stamp is
    gone, or `recon` does not import); a run with nothing changed says so and goes on to the
    other steps."""
    import hashlib

    stamp = ROOT / ".venv" / ".recon-deps"
    pinned = b"".join(
        (ROOT / p).read_bytes() for p in ("constraints.txt", "pyproject.toml", "scripts/setup.sh")
    )
    python = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), "--version"], capture_output=True, text=True
    ).stdout.strip()
    assert stamp.read_text().strip() == f"{hashlib.sha256(pinned).hexdigest()} {python}"
    env = {**os.environ, "RECON_SKIP_SYSTEM_PACKAGES": "1"}
    proc = subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "setup: dependencies unchanged since the last install" in proc.stdout, proc.stdout
    assert "pip" not in proc.stderr  # no pip ran (pip warns about this image's extra index)
    assert stamp.read_text().strip() == f"{hashlib.sha256(pinned).hexdigest()} {python}"


def test_spark_submit_drivers_and_python_workers_import_the_installed_pyspark(
    tmp_path: Path,
) -> None:
    """spark-submit puts pyspark's zip (no compiled files) first on the driver's and the Python
    daemon's path; `recon.sparkpath` takes it off when it is the installed pyspark's own, so
    both import pyspark from the package (its cached bytecode), the daemon being
    `recon.sparkpath` (`get_spark`, local master, this interpreter). A daemon the user sets
    stays theirs."""
    job = tmp_path / "job.py"
    job.write_text(
        "import json, os, sys\n"
        "from recon.sparkpath import prefer_installed_pyspark\n"
        "removed = prefer_installed_pyspark()\n"
        "import pyspark\n"
        "from recon.spark.session import get_spark\n"
        "spark = get_spark('sparkpath-test')\n"
        "def where(_):\n"
        "    import pyspark as p\n"
        "    with open(f'/proc/{os.getppid()}/cmdline', 'rb') as f:\n"
        "        daemon = f.read().replace(b'\\0', b' ').decode()\n"
        "    return p.__file__, daemon, [x for x in sys.path if x.endswith('.zip')]\n"
        "w = spark.sparkContext.parallelize([0], 1).map(where).collect()[0]\n"
        "print('RESULT', json.dumps({'removed': removed, 'driver': pyspark.__file__,\n"
        "      'worker': w[0], 'daemon': w[1], 'worker_zips': w[2]}))\n"
    )
    venv_bin = Path(sys.executable).parent
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PATH=f"{venv_bin}:{os.environ['PATH']}")

    def submit(*conf: str) -> dict[str, Any]:
        proc = subprocess.run(
            [str(venv_bin / "spark-submit"), "--master", "local[1]", *conf, str(job)],
            capture_output=True, text=True, env=env, timeout=300, cwd=ROOT,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
        return dict(json.loads(line[len("RESULT ") :]))

    got = submit()
    assert any(r.endswith("pyspark.zip") for r in got["removed"]), got
    assert any(r.endswith("-src.zip") for r in got["removed"]), got  # py4j's, same version
    for side in ("driver", "worker"):
        assert ".zip" not in got[side] and got[side].endswith("pyspark/__init__.py"), got
    assert "-m recon.sparkpath pyspark.worker" in got["daemon"], got
    assert not any("pyspark.zip" in z for z in got["worker_zips"]), got
    theirs = submit("--conf", "spark.python.daemon.module=pyspark.daemon")
    assert "-m pyspark.daemon pyspark.worker" in theirs["daemon"], theirs
    assert any("pyspark.zip" in z for z in theirs["worker_zips"]), theirs


def test_pyspark_asks_the_jvm_for_a_class_or_static_method_once(spark) -> None:
    """`recon.spark.py4j_lookups`: building columns repeats no reflection round trip (each
    `F.col` asked the JVM for `functions`, then for `col`), and what is not a class or a
    static method (a package, a static field's value) is still asked every time."""
    from py4j import protocol as proto
    from pyspark.sql import functions as F

    client = spark.sparkContext._gateway._gateway_client
    sent: list[str] = []
    send = client.send_command

    def counting(command: str, *args: Any, **kwargs: Any) -> Any:
        if command.startswith(proto.REFLECTION_COMMAND_NAME):
            sent.append(command)
        return send(command, *args, **kwargs)

    F.col("warm"), F.lit(1)
    client.send_command = counting
    try:
        cols = [F.col(f"c{i}") + F.lit(i) for i in range(50)]
        assert not sent, sent[:3]
        jvm = spark.sparkContext._jvm
        integer = jvm.java.lang.Integer  # through packages, asked every time
        assert integer.MAX_VALUE == 2**31 - 1  # a static field's value
        assert integer.MAX_VALUE == 2**31 - 1
        # the field's value is asked both times (a cached one would be read once)
        assert sum("\nMAX_VALUE\n" in c for c in sent) == 2, sent
    finally:
        client.send_command = send
    assert spark.range(1).select(F.lit(3).alias("c7")).select(cols[7]).first()[0] == 10
