"""The run's Spark application (`recon.ops.app_server`) in a DAG: a setup task starts it with
the `spark_default` connection's spark-submit, the stage tasks use it when they can reach it,
a teardown task stops it (Airflow runs a teardown after its work tasks whatever their state,
and clearing a stage clears its setup and teardown with it).

Reaching it needs the stage to run on the machine that started it (LocalExecutor, `airflow
dags test`); a task elsewhere (another Celery worker), or after it ended, runs spark-submit as
before. A cluster deploy mode starts none: its driver would not be on this machine.

With `RECON_SPARK_APP_SHARED` on the workers, a run's application outlives it for the next run:
the setup task takes (leases) an application an earlier run left serving, started with the
same spark-submit (connection, settings, environment: `shared_key`), if one is free, else
starts one; the teardown gives it back, serving. A run still has its application to itself
from setup to teardown, so the failure rules are those of an application per run; what it
saves is the JVM start and its warm-up. A free application exits after
`RECON_SPARK_APP_IDLE_S` without a request."""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator

from recon.appsocket import (
    APP_INFO,
    IDLE_S,
    LEASE,
    SHARED_VAR,
    is_app_process,
    reachable,
    stop_process,
    wait_ready,
)

APP_TASK = "spark_app"
SWITCH = "RECON_SPARK_APP_PER_RUN"
"""`false` on the workers: no application per run, a spark-submit per stage (as before)."""
IDLE_VAR = "RECON_SPARK_APP_IDLE_S"
"""Seconds without a request after which the application exits (default `IDLE_S`)."""
SHARED = SHARED_VAR
SHARED_NAME = "recon-shared-app"
READY_S = 300.0


def app_info(context: Any) -> dict[str, Any] | None:
    """The run's application as its setup task left it, if it runs on this machine."""
    ti = context.get("ti")
    info = ti.xcom_pull(task_ids=APP_TASK) if ti is not None else None
    if not isinstance(info, dict) or info.get("host") != socket.gethostname():
        return None
    return info


def _on(value: str) -> bool:
    return value.lower() not in ("", "0", "false", "no", "off")


def shared_folder() -> str | None:
    """Where shared applications live (`SHARED`), or None: one per run."""
    value = os.environ.get(SHARED, "").strip()
    if not _on(value):
        return None
    if value.lower() in ("1", "true", "yes", "on"):
        value = os.path.join(tempfile.gettempdir(), f"recon-apps-{os.getuid()}")
    os.makedirs(value, mode=0o700, exist_ok=True)
    problem = private_folder_problem(value)
    if problem:
        raise PermissionError(f"{value}: {problem}; remove it (or set {SHARED} to another folder)")
    return value


def private_folder_problem(path: str) -> str | None:
    """Why `path` is not a folder only this user can reach (a shared temporary folder could
    hold another user's folder or link there, whose applications and sockets this user's
    stages would then use), or None."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return "is not a folder (a link, or a file)"
    if st.st_uid != os.getuid():
        return f"belongs to uid {st.st_uid}, not to this user ({os.getuid()})"
    if st.st_mode & 0o077:
        return f"is open to others (mode {stat.S_IMODE(st.st_mode):o}, wanted 700)"
    return None


def shared_key(cmd: list[str], application: str, env: dict[str, str]) -> str:
    """What makes two runs' applications the same: the spark-submit command up to the
    application (its arguments name the socket) and the environment it is given."""
    upto = cmd[: cmd.index(application) + 1] if application in cmd else cmd
    spark_env = {k: v for k, v in env.items() if k.startswith(("SPARK_", "PYSPARK_", "RECON_"))}
    text = json.dumps([upto, sorted(spark_env.items())])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stop_app(info: dict[str, Any], timeout_s: float | None = 60.0) -> None:
    """Ask it to stop, else kill it (`recon.appsocket.stop_process`)."""
    stop_process(int(info["pid"]), str(info["socket"]), timeout_s)


class SparkAppStart(SparkSubmitOperator):
    """Setup: `recon/jobs/app.py` under the connection's spark-submit, detached; returns where to
    reach it (XCom), or None when it cannot serve this run (the stages then spark-submit)."""

    def execute(self, context: Any) -> dict[str, Any] | None:  # type: ignore[override]
        if not _on(os.environ.get(SWITCH, "true")):
            self.log.info("%s is off: each stage runs its own spark-submit", SWITCH)
            return None
        try:
            shared = shared_folder()
        except PermissionError as err:  # not to be trusted: an application of this run's own
            self.log.warning("not sharing Spark applications: %s", err)
            shared = None
        if shared is None:
            return self._start(tempfile.mkdtemp(prefix="recon-app-"))
        self.name = SHARED_NAME  # one name for the runs it serves
        self.application_args = []
        hook = self._get_hook()
        env = {**os.environ, **(hook._env or {})}
        key = shared_key(hook._build_spark_submit_command(self.application), self.application, env)
        run = f"{getattr(context.get('dag'), 'dag_id', '')} {context.get('run_id', '')}"
        folder, info = _lease(shared, key, run)
        if info is not None:
            self.log.info("the run takes the Spark application an earlier run left serving "
                          "(log %s)", info["log"])  # fmt: skip
            return info
        info = self._start(folder)
        if info is None:
            return None
        info["shared"] = True
        with open(os.path.join(folder, APP_INFO), "w", encoding="utf-8") as f:
            json.dump(info, f)
        return info

    def _start(self, folder: str) -> dict[str, Any] | None:
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


def _lease(shared: str, key: str, run: str) -> tuple[str, dict[str, Any] | None]:
    """(folder, the application there) of a free application of `key` that serves, leased to
    `run`; else a folder leased to `run` for a new one (None: start it there)."""
    fd = os.open(
        os.path.join(shared, f"{key}.lock"), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600
    )
    with os.fdopen(fd, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one setup task picks at a time
        slots = sorted(glob.glob(os.path.join(glob.escape(shared), f"{key}-*[0-9]")))
        unused = None
        for folder in slots:
            leased = os.path.exists(os.path.join(folder, LEASE))
            info = _serving(folder)
            if info is not None and not leased:
                return _leased(folder, run), info
            if unused is None and info is None and not (leased and _recent(folder)):
                unused = folder  # ended, or its start failed: a new one may go here
        n = 0
        while unused is None and os.path.exists(os.path.join(shared, f"{key}-{n}")):
            n += 1
        folder = unused or os.path.join(shared, f"{key}-{n}")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder, mode=0o700)
        return _leased(folder, run), None


def _leased(folder: str, run: str) -> str:
    with open(os.path.join(folder, LEASE), "w", encoding="utf-8") as f:
        f.write(run)
    return folder


def _recent(folder: str) -> bool:
    """A lease of an application still starting (a start waits at most `READY_S`)."""
    try:
        return time.time() - os.path.getmtime(os.path.join(folder, LEASE)) < READY_S + 60
    except OSError:
        return False


def _serving(folder: str) -> dict[str, Any] | None:
    """The shared application in `folder`, if it serves."""
    try:
        with open(os.path.join(folder, APP_INFO), encoding="utf-8") as f:
            info: dict[str, Any] = json.load(f)
    except (OSError, ValueError):
        return None
    sock = str(info.get("socket", ""))
    if not (reachable(sock) and is_app_process(int(info.get("pid", 0)), sock)):
        return None
    return {**info, "host": socket.gethostname()}


class SparkAppStop(BaseOperator):
    """Teardown: stops the run's application (it succeeds whatever the application's state);
    a shared one serves on."""

    def execute(self, context: Any) -> None:
        info = app_info(context)
        if info is None:
            return
        if info.get("shared"):
            folder = os.path.dirname(str(info["socket"]))
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, LEASE))
            if _serving(folder) is not None:
                self.log.info("the run's Spark application serves on for the next run (log %s)",
                              info["log"])  # fmt: skip
            else:  # stopped after a failed stage, or gone: the next run starts another
                self.log.info("the run's Spark application has ended")
            return
        stop_app(info)
        shutil.rmtree(os.path.dirname(str(info["socket"])), ignore_errors=True)
        self.log.info("the run's Spark application stopped")
