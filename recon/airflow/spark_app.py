"""The run's Spark application (`recon.ops.app_server`) in a DAG: a setup task starts it with
the `spark_default` connection's spark-submit, the stage tasks use it when they can reach it,
a teardown task stops it (Airflow runs a teardown after its work tasks whatever their state,
and clearing a stage clears its setup and teardown with it).

Reaching it needs the stage to run on the machine that started it (LocalExecutor, `airflow
dags test`); a task elsewhere (another Celery worker), or after it ended, runs spark-submit as
before. A cluster deploy mode starts none: its driver would not be on this machine."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator

from recon.appsocket import IDLE_S, is_app_process, request, wait_ready

APP_TASK = "spark_app"
SWITCH = "RECON_SPARK_APP_PER_RUN"
"""`false` on the workers: no application per run, a spark-submit per stage (as before)."""
IDLE_VAR = "RECON_SPARK_APP_IDLE_S"
"""Seconds without a request after which the application exits (default `IDLE_S`)."""
READY_S = 300.0


def app_info(context: Any) -> dict[str, Any] | None:
    """The run's application as its setup task left it, if it runs on this machine."""
    ti = context.get("ti")
    info = ti.xcom_pull(task_ids=APP_TASK) if ti is not None else None
    if not isinstance(info, dict) or info.get("host") != socket.gethostname():
        return None
    return info


def stop_app(info: dict[str, Any], timeout_s: float = 60.0) -> None:
    """Ask it to stop (it exits on its own once it answered); kill its process group when it
    does not answer in `timeout_s` (a stage still running in it: its task was killed)."""
    pid, sock = int(info["pid"]), str(info["socket"])
    try:
        if request(sock, {"stop": True}, poll_s=0.2, timeout_s=timeout_s) == 0:
            return
    except Exception:  # no answer: killed below
        pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not is_app_process(pid, sock):
            break
        with contextlib.suppress(OSError):
            os.killpg(pid, sig)
        for _ in range(50):
            if not is_app_process(pid, sock):
                break
            time.sleep(0.2)


class SparkAppStart(SparkSubmitOperator):
    """Setup: `jobs/app.py` under the connection's spark-submit, detached; returns where to
    reach it (XCom), or None when it cannot serve this run (the stages then spark-submit)."""

    def execute(self, context: Any) -> dict[str, Any] | None:  # type: ignore[override]
        if os.environ.get(SWITCH, "true").lower() in ("0", "false", "no", "off"):
            self.log.info("%s is off: each stage runs its own spark-submit", SWITCH)
            return None
        folder = tempfile.mkdtemp(prefix="recon-app-")
        sock, log = os.path.join(folder, "socket"), os.path.join(folder, "spark.log")
        # before the hook, which copies them
        self.application_args = ["--socket", sock, "--app-name", self.name or "recon-app"]
        self.application_args += ["--idle-seconds", str(self._idle_seconds())]
        hook = self._get_hook()
        if hook._connection.get("deploy_mode") == "cluster":
            self.log.info("cluster deploy mode: each stage runs its own spark-submit")
            shutil.rmtree(folder, ignore_errors=True)
            return None
        cmd = hook._build_spark_submit_command(self.application)
        env = {**os.environ, **(hook._env or {})}
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # not killed with this task's process group
            )
        info = {"host": socket.gethostname(), "socket": sock, "log": log, "pid": proc.pid}
        if wait_ready(sock, lambda: proc.poll() is None, READY_S):
            self.log.info("the run's Spark application serves its stages (log %s)", log)
            return info
        stop_app(info, timeout_s=0)
        with open(log, encoding="utf-8", errors="replace") as f:
            tail = f.read()[-3000:]
        self.log.warning("the run's Spark application did not start; each stage runs its own "
                         "spark-submit. Its output:\n%s", tail)  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)
        return None

    def _idle_seconds(self) -> float:
        text = os.environ.get(IDLE_VAR)
        try:
            return float(text) if text else IDLE_S
        except ValueError:
            self.log.warning("%s=%r is not a number of seconds; using %s", IDLE_VAR, text, IDLE_S)
            return IDLE_S


class SparkAppStop(BaseOperator):
    """Teardown: stops the run's application (it succeeds whatever the application's state)."""

    def execute(self, context: Any) -> None:
        info = app_info(context)
        if info is None:
            return
        stop_app(info)
        shutil.rmtree(os.path.dirname(str(info["socket"])), ignore_errors=True)
        self.log.info("the run's Spark application stopped")
