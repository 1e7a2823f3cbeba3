"""Run the pipelines' DAGs on this machine the way `airflow dags test` does: a throwaway Airflow
home with a SQLite metadata database, this project's `dags/`, the `spark_default` connection on
local Spark with this venv's interpreter, real spark-submit. Used by `recon demo` and the tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from recon.errors import ReconError
from recon.layout import CHECKOUT, DEMO_DATA, PROJECT_ROOT, demo_home, shipped


def airflow_env(home: Path, pipelines: Path, master: str = "local[2]") -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    return dict(
        os.environ,
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(shipped("dags/recon_pipelines.py").parent),
        # the recon plugin comes by the package's entry point; this folder is for the user's own
        AIRFLOW__CORE__PLUGINS_FOLDER=str(
            PROJECT_ROOT / "plugins" if CHECKOUT else home / "plugins"
        ),
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        RECON_PIPELINES_DIR=str(pipelines),
        PATH=venv_bin + os.pathsep + os.environ.get("PATH", ""),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": master}),
    )


def _airflow() -> str:
    exe = Path(sys.executable).parent / "airflow"
    return str(exe) if exe.exists() else "airflow"


def migrate(env: dict[str, str]) -> None:
    r = subprocess.run(
        [_airflow(), "db", "migrate"], env=env, capture_output=True, text=True, timeout=600
    )
    if r.returncode != 0:
        raise ReconError(f"airflow db migrate failed: {(r.stderr or r.stdout).strip()[-300:]}")
    # the stage tasks' pool (a task of a missing pool would wait, unscheduled, with no error)
    r = subprocess.run(
        [sys.executable, "-m", "recon.airflow.pool"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if r.returncode != 0:
        raise ReconError(f"creating Airflow's pool failed: {(r.stderr or r.stdout).strip()[-300:]}")


def dags_test(
    env: dict[str, str],
    dag_id: str,
    first: str,
    last: str | None = None,
    log: Path | None = None,
    params: dict[str, object] | None = None,
    server: DagsTestServer | None = None,
) -> str:
    """One DAG run for the hours first..last (its params, plus `params`); returns the run's
    final state. `server`: run it forked from that server's interpreter (`env` is the
    server's), else as its own `airflow` process."""
    conf = {"hour": first, "hour_to": last or first, **(params or {})}
    logical = f"{last or first}:00:00+00:00"
    argv = ["dags", "test", dag_id, logical, "-c", json.dumps(conf)]
    rc, out = server.run(argv, log) if server is not None else (None, None)
    if rc is None or out is None:
        r = subprocess.run(
            [_airflow(), *argv], env=env, capture_output=True, text=True, timeout=1800
        )
        rc, out = r.returncode, r.stdout + r.stderr
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(out)
    states = re.findall(r"DagRun Finished: .*?state=(\w+)", out)
    if states:
        return states[-1]
    m = re.findall(r"dagrun=<DagRun [^>]*state:(\w+)", out)
    if rc != 0 or not m:
        tail = out.strip().splitlines()[-1:] if out.strip() else [""]
        raise ReconError(f"airflow dags test {dag_id} did not finish (rc {rc}): {tail[0][:300]}")
    return m[-1]


class DagsTestServer:
    """`airflow dags test` runs forked from one interpreter that imported Airflow once
    (`recon.demo.dags_fork`), for many runs against one Airflow home (`env`). Thread-safe:
    runs may overlap. A server that could not start, or ended, before a run is asked of it makes
    `run` return (None, None), and the caller runs its own `airflow` process.

    `after_migrate`: the server writes the Airflow home's config file (`configured()` waits for
    it), then imports Airflow while the caller migrates the database, and writes to the
    database only once the caller says `migrated()`."""

    def __init__(self, env: dict[str, str], after_migrate: bool = False) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "recon.demo.dags_fork"]
            + (["--after-migrate"] if after_migrate else []),
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.lock = threading.Lock()
        self.next_id = 0
        self.done: dict[int, int] = {}
        self.ready = False
        self.is_configured = False
        self.changed = threading.Condition(self.lock)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                got = json.loads(line)
            except ValueError:
                continue
            with self.changed:
                if got.get("ready"):
                    self.ready = True
                elif got.get("configured"):
                    self.is_configured = True
                else:
                    self.done[int(got["id"])] = int(got["rc"])
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()  # ended: waiters see it gone

    def configured(self) -> bool:
        """Waits until the server wrote the Airflow home's config file (`after_migrate`);
        False when it ended first (the runs then fall back to their own `airflow`)."""
        with self.changed:
            while not self.is_configured and self.reader.is_alive():
                self.changed.wait(1.0)
            return self.is_configured

    def migrated(self) -> None:
        """The database is migrated: the server may write to it (`after_migrate`)."""
        with self.lock:
            if self.proc.stdin is not None and self.proc.poll() is None:
                try:
                    self.proc.stdin.write(json.dumps({"migrated": True}) + "\n")
                    self.proc.stdin.flush()
                except OSError:
                    pass  # it ended: each run falls back to its own `airflow` process

    def run(self, argv: list[str], log: Path | None) -> tuple[int | None, str | None]:
        """(exit code, output) of `airflow *argv`; (None, None) when the server is gone."""
        with tempfile.TemporaryDirectory(prefix="recon-dags-test-") as tmp:  # a log if none given
            out = log or Path(tmp) / "dags-test.log"
            out.parent.mkdir(parents=True, exist_ok=True)
            with self.changed:
                while not self.ready and self.reader.is_alive():
                    self.changed.wait(1.0)
                if not self.ready or self.proc.poll() is not None or self.proc.stdin is None:
                    return None, None  # it could not import Airflow, or it ended
                rid, self.next_id = self.next_id, self.next_id + 1
                try:
                    self.proc.stdin.write(json.dumps({"id": rid, "argv": argv, "log": str(out)}))
                    self.proc.stdin.write("\n")
                    self.proc.stdin.flush()
                except OSError:
                    return None, None
                deadline = time.monotonic() + 1800
                while rid not in self.done:
                    if not self.reader.is_alive():  # the server ended with the run unanswered
                        raise ReconError(f"airflow {' '.join(argv[:3])}: its process ended "
                                         f"without an exit code; see {out}")  # fmt: skip
                    if time.monotonic() > deadline:
                        raise ReconError(f"airflow {' '.join(argv[:3])} did not finish in 30 min")
                    self.changed.wait(1.0)
                rc = self.done.pop(rid)
            return rc, out.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait()

    def __enter__(self) -> DagsTestServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def standalone(home: Path | None = None) -> int:
    """`make airflow`: scheduler, dag-processor, triggerer and the UI on http://localhost:8080
    with this project's DAGs, plugin and demo pipelines (Ctrl-C stops them). The home is the one
    `recon demo` runs its DAGs in, so the demo's runs and reports are there to look at."""
    home = home or DEMO_DATA / "airflow"
    env = airflow_env(home, demo_home() / "pipelines", master="local[*]")
    print(
        f"Airflow home {home}; UI http://localhost:8080 (user admin, password in "
        f"{home / 'simple_auth_manager_passwords.json.generated'})",
        flush=True,
    )
    migrate(env)  # and the stage tasks' pool, before the scheduler looks for it
    return subprocess.call([_airflow(), "standalone"], env=env)


if __name__ == "__main__":
    sys.exit(standalone())
