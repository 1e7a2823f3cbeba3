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
from pathlib import Path

from recon.errors import ReconError
from recon.layout import DEMO_DATA, PROJECT_ROOT


def airflow_env(home: Path, pipelines: Path, master: str = "local[2]") -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    return dict(
        os.environ,
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(PROJECT_ROOT / "dags"),
        AIRFLOW__CORE__PLUGINS_FOLDER=str(PROJECT_ROOT / "plugins"),
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


def dags_test(
    env: dict[str, str],
    dag_id: str,
    first: str,
    last: str | None = None,
    log: Path | None = None,
    params: dict[str, object] | None = None,
) -> str:
    """One DAG run for the hours first..last (its params, plus `params`); returns the run's
    final state."""
    conf = {"hour": first, "hour_to": last or first, **(params or {})}
    logical = f"{last or first}:00:00+00:00"
    r = subprocess.run(
        [_airflow(), "dags", "test", dag_id, logical, "-c", json.dumps(conf)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    out = r.stdout + r.stderr
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(out)
    states = re.findall(r"DagRun Finished: .*?state=(\w+)", out)
    if states:
        return states[-1]
    m = re.findall(r"dagrun=<DagRun [^>]*state:(\w+)", out)
    if r.returncode != 0 or not m:
        tail = out.strip().splitlines()[-1:] if out.strip() else [""]
        raise ReconError(
            f"airflow dags test {dag_id} did not finish (rc {r.returncode}): {tail[0][:300]}"
        )
    return m[-1]


def standalone(home: Path | None = None) -> int:
    """`make airflow`: scheduler, dag-processor, triggerer and the UI on http://localhost:8080
    with this project's DAGs, plugin and demo pipelines (Ctrl-C stops them). The home is the one
    `recon demo` runs its DAGs in, so the demo's runs and reports are there to look at."""
    home = home or DEMO_DATA / "airflow"
    env = airflow_env(home, PROJECT_ROOT / "pipelines", master="local[*]")
    print(
        f"Airflow home {home}; UI http://localhost:8080 (user admin, password in "
        f"{home / 'simple_auth_manager_passwords.json.generated'})",
        flush=True,
    )
    return subprocess.call([_airflow(), "standalone"], env=env)


if __name__ == "__main__":
    sys.exit(standalone())
