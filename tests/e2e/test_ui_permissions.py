"""The audit pages in the Airflow UI obey Airflow's DAG permissions (issue 12, item 14): a real
api-server with the FAB auth manager (per-DAG roles, what deployments use to split access),
two pipelines and two users who may each read one pipeline's DAG. Each gets its own pipeline's
pages and files, 403 for the other's, and an index listing only its own."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from recon.demo.airflow_local import airflow_env, migrate
from tests.support.airflow_services import free_port
from tests.support.builders import write_pipeline

FAB = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
USERS = {"alice": ("pa", "pw-" + secrets.token_hex(4)), "bob": ("pb", "pw-" + secrets.token_hex(4))}
HOUR = "2026-01-01T00"


def _airflow(env: dict[str, str], *args: str) -> str:
    exe = str(Path(sys.executable).parent / "airflow")
    r = subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (args, r.stderr[-2000:])
    return r.stdout


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("airflow_fab")
    pipelines = home / "pipelines"
    for name, _ in USERS.values():
        write_pipeline(
            pipelines / f"{name}.yaml",
            name=name,
            format="debezium_json",
            raw=home / "raw",
            warehouse=home / "wh",
            topics=["t"],
        )
        audit = home / "wh" / "audit" / name / HOUR
        audit.mkdir(parents=True)
        report = {"hour": HOUR, "verdict": "pass", "findings": [], "run_id": f"run_of_{name}"}
        (audit / "report.json").write_text(json.dumps(report))
        (audit / "secret.txt").write_text(f"quarantined bytes of {name}")
    port = free_port()
    env = dict(
        airflow_env(home, pipelines),
        AIRFLOW__CORE__AUTH_MANAGER=FAB,
        AIRFLOW__API__PORT=str(port),
        AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_hex(32),
        AIRFLOW__API__SECRET_KEY=secrets.token_hex(16),
    )
    migrate(env)
    _airflow(env, "dags", "reserialize")  # the DAGs in the database ...
    _airflow(env, "sync-perm", "--include-dags")  # ... and a permission resource for each
    for user, (pipeline, password) in USERS.items():
        role = f"reads_{pipeline}"
        _airflow(env, "roles", "create", role)
        _airflow(
            env,
            "roles",
            "add-perms",
            role,
            "-r",
            f"DAG:recon_{pipeline}",
            "DAG Runs",
            "-a",
            "can_read",
        )
        _airflow(
            env,
            "users",
            "create",
            "-u",
            user,
            "-p",
            password,
            "-r",
            role,
            "-f",
            user,
            "-l",
            "x",
            "-e",
            f"{user}@example.org",
        )
    log = open(home / "api-server.log", "wb")  # noqa: SIM115 - closed below
    exe = str(Path(sys.executable).parent / "airflow")
    proc = subprocess.Popen(
        [exe, "api-server", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    url = f"http://localhost:{port}"
    try:
        deadline = time.time() + 180
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=5)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if proc.poll() is not None or time.time() > deadline:
                    raise AssertionError((home / "api-server.log").read_text()[-3000:]) from None
                time.sleep(2)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _token(url: str, user: str) -> str:
    req = urllib.request.Request(
        f"{url}/auth/token",
        data=json.dumps({"username": user, "password": USERS[user][1]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return str(json.load(r)["access_token"])


def _get(url: str, path: str, token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url + path, headers=headers), timeout=30
        ) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_each_user_reads_only_the_pipelines_its_dag_permissions_allow(api: str) -> None:
    for user, (mine, _) in USERS.items():
        other = next(p for p, _ in USERS.values() if p != mine)
        tok = _token(api, user)
        status, index = _get(api, "/recon/", tok)
        assert status == 200 and f"recon_{mine}" in index and f"recon_{other}" not in index
        for path in (
            f"/recon/dags/recon_{mine}",
            f"/recon/dags/recon_{mine}/runs/run_of_{mine}",
            f"/recon/files/{mine}/{HOUR}/secret.txt",
        ):
            status, body = _get(api, path, tok)
            assert status == 200, (user, path, body[:300])
        assert _get(api, f"/recon/files/{mine}/{HOUR}/secret.txt", tok)[1] == (
            f"quarantined bytes of {mine}"
        )
        for path in (
            f"/recon/dags/recon_{other}",
            f"/recon/dags/recon_{other}/runs/run_of_{other}",
            f"/recon/files/{other}/{HOUR}/secret.txt",
            f"/recon/files/{other}/{HOUR}/report.json",
        ):
            status, body = _get(api, path, tok)
            assert status == 403, (user, path, status, body[:300])
            assert other not in body or "may not read" in body
    # and without logging in, nothing
    assert _get(api, f"/recon/files/pa/{HOUR}/secret.txt", None)[0] in (401, 403)
