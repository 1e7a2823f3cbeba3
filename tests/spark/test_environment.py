"""The installed environment works: pyspark's own files (not pyspark-client's) run mapInArrow,
and spark-submit runs the decode job end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

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
            str(ROOT / "jobs" / "stage.py"),
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


def test_a_small_hours_queries_run_without_whole_stage_code_generation(spark) -> None:
    """`sized_for`: off inside for a small hour (and back after, also on error); a big hour,
    or a user who set it, keeps it."""
    from recon.spark.session import WHOLE_STAGE_CODEGEN, sized_for

    def codegen() -> str:
        return str(spark.conf.get(WHOLE_STAGE_CODEGEN)).lower()

    assert codegen() == "true"
    with sized_for(spark, small=True):
        assert codegen() == "false"
        plan = spark.range(5).selectExpr("id + 1 as x")._jdf.queryExecution().executedPlan()
        assert "WholeStageCodegen" not in plan.toString()
    assert codegen() == "true"
    with sized_for(spark, small=False):
        assert codegen() == "true"
    try:
        with sized_for(spark, small=True):
            raise RuntimeError("stage failed")
    except RuntimeError:
        pass
    assert codegen() == "true"


def test_driver_jvms_map_the_class_archive_setup_built(tmp_path: Path) -> None:
    """Setup builds Spark's classes into a class-data-sharing archive (`recon.demo.class_archive`) and
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


def test_setup_sees_pyspark_intact_so_it_keeps_the_jars_the_archive_is_for() -> None:
    """Setup reinstalls pyspark only when a file of it changed (`scripts/pyspark_intact.py`):
    an unconditional reinstall rewrote the jars at every `make setup`, and the JVM then refused
    the class archive (built for the jars as they were) without a word."""
    script = ROOT / "scripts" / "pyspark_intact.py"
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
