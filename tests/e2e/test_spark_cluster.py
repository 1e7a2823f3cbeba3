"""Moving the work by changing only the `spark_default` connection: a Spark standalone master and
worker (pip pyspark's own `spark-class`) on this machine, a DAG run through `airflow dags test`
whose stages run as applications of that cluster, their executors on the packed environment of
`make pack` (spark.archives); the tables equal `recon run`'s on local Spark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from recon.cli import main
from recon.config import load_config
from recon.demo.airflow_local import airflow_env, dags_test, migrate
from recon.publish.export import export_rows
from tests.conftest import ROOT
from tests.support.airflow_services import free_port
from tests.support.canal import write_canal_dump, write_canal_pipeline

START = datetime(2026, 7, 1, 0, tzinfo=UTC)
H0, H1 = START, START + timedelta(hours=1)


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, str]]:
    port, ui, wui = free_port(), free_port(), free_port()
    env = dict(
        os.environ,
        SPARK_LOG_DIR=str(tmp_path / "spark-logs"),
        PYSPARK_PYTHON=sys.executable,
        PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    )
    logs = [open(tmp_path / f"{n}.log", "wb") for n in ("master", "worker")]  # noqa: SIM115
    master = subprocess.Popen(
        [_spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(ui)],
        env=env, stdout=logs[0], stderr=logs[0],
    )  # fmt: skip
    worker = subprocess.Popen(
        [_spark_class(), "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
         "--host", "127.0.0.1", "--cores", "2", "--memory", "3g", "--webui-port", str(wui),
         "--work-dir", str(tmp_path / "spark-work")],
        env=env, stdout=logs[1], stderr=logs[1],
    )  # fmt: skip
    state_url = f"http://127.0.0.1:{ui}/json/"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(state_url, timeout=5) as r:
                    if any(w["state"] == "ALIVE" for w in json.load(r)["workers"]):
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise AssertionError((tmp_path / "worker.log").read_text()[-2000:])
            time.sleep(1)
        yield f"spark://127.0.0.1:{port}", state_url
    finally:
        for p in (worker, master):
            p.terminate()
            p.wait(timeout=30)
        for f in logs:
            f.close()


def test_the_dag_runs_on_a_standalone_cluster_by_changing_the_connection(
    spark, tmp_path: Path, cluster: tuple[str, str]
) -> None:
    master, state_url = cluster
    write_canal_dump(tmp_path / "raw", "sc", START, 2, seed=3)
    dag_cfg = write_canal_pipeline(
        tmp_path / "pipelines", "sc", tmp_path / "raw", tmp_path / "wh_dag", START
    )
    # the executors run the project from `make pack`'s archives, not from this checkout's venv
    pack = tmp_path / "dist"
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "pack.sh")],
        env=dict(os.environ, RECON_PACK_DIR=str(pack)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    conf = json.loads(r.stdout.split("RECON_SPARK_CONF=", 1)[1].strip().strip("'"))
    assert conf["spark.pyspark.python"] == "./env/bin/python"
    env = dict(
        airflow_env(tmp_path / "airflow", tmp_path / "pipelines", master=master),
        RECON_SPARK_CONF=json.dumps(conf),
    )
    migrate(env)
    log = tmp_path / "dag.log"
    state = dags_test(env, "recon_sc", "2026-07-01T00", "2026-07-01T01", log=log)
    assert state == "success", log.read_text()[-3000:]
    with urllib.request.urlopen(state_url, timeout=5) as r:
        apps = json.load(r)["completedapps"]
    # decode, merge_publish and audit ran in the run's one application of the cluster (its
    # driver on this machine, client mode: the setup task started it with the connection)
    names = [a["name"] for a in sorted(apps, key=lambda a: a["starttime"])]
    assert names == ["recon-sc"], apps
    assert "::group::decode in the run's Spark application" in log.read_text()
    # the application's executor unpacked the environment and ran its Python from it
    unpacked = sorted((tmp_path / "spark-work").glob("app-*/*/env/bin/python"))
    assert len(unpacked) == 1, sorted(p.name for p in (tmp_path / "spark-work").glob("app-*"))
    # (and imported `recon` from the archive's site-packages: the packed venv has no link to
    # this checkout, so without it the decode's Python UDFs could not have run)
    run_cfg = write_canal_pipeline(
        tmp_path / "direct", "sc", tmp_path / "raw", tmp_path / "wh_run", START
    )
    assert (
        main(
            ["run", "--pipeline", str(run_cfg), "--from", "2026-07-01T00", "--to", "2026-07-01T01"]
        )
        == 0
    )
    rows = list(export_rows(load_config(dag_cfg), "shop.orders"))
    assert rows == list(export_rows(load_config(run_cfg), "shop.orders")) and len(rows) >= 3
