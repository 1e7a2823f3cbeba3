"""A running Airflow for tests: dag-processor, scheduler (LocalExecutor), triggerer and api-server as separate
processes on a throwaway home with the SQLite metadata database, this project's dags/ and
plugins/, a known user, and the REST API to drive it. What `airflow standalone` starts, with
the port and the password under the test's control."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from recon.demo.airflow_local import airflow_env, migrate

USER, PASSWORD = "admin", "recon-test-" + secrets.token_hex(4)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AirflowServices:
    def __init__(self, home: Path, pipelines: Path, db_uri: str | None = None, **env: str) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://localhost:{self.port}"
        home.mkdir(parents=True, exist_ok=True)
        (home / "passwords.json").write_text(json.dumps({USER: PASSWORD}))
        self.env = dict(
            airflow_env(home, pipelines),
            AIRFLOW__CORE__EXECUTOR="LocalExecutor",
            AIRFLOW__CORE__PARALLELISM="4",
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=f"{USER}:admin",
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(home / "passwords.json"),
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"{self.url}/execution/",
            AIRFLOW__API__PORT=str(self.port),
            AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_hex(32),
            AIRFLOW__API__SECRET_KEY=secrets.token_hex(16),
            AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5",
            AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="2",
            AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT="1800",
            **env,
        )
        if db_uri:  # production's metadata database (PostgreSQL) instead of SQLite
            self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = db_uri
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._token: str | None = None

    def start(self) -> AirflowServices:
        migrate(self.env)
        exe = str(Path(sys.executable).parent / "airflow")
        for name, args in (
            ("api-server", ["api-server", "--port", str(self.port)]),
            ("dag-processor", ["dag-processor"]),
            ("scheduler", ["scheduler"]),
            ("triggerer", ["triggerer"]),  # runs the deadline alerts' callbacks
        ):
            log = open(self.home / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
            self.procs.append(
                (
                    name,
                    subprocess.Popen(  # own process group: stop() ends its children too
                        [exe, *args], env=self.env, stdout=log, stderr=log, start_new_session=True
                    ),
                )
            )
        self.wait(lambda: self._get("/api/v2/monitor/health", auth=False) is not None, 180)
        return self

    def logs(self) -> str:
        return "\n".join(
            f"--- {n}.log\n" + (self.home / f"{n}.log").read_text(errors="replace")[-3000:]
            for n, _ in self.procs
        )

    def wait(self, check: Any, timeout: float, what: str = "") -> Any:
        deadline = time.time() + timeout
        while time.time() < deadline:
            for name, p in self.procs:
                if p.poll() is not None:
                    raise AssertionError(f"airflow {name} exited ({p.returncode})\n{self.logs()}")
            v = check()
            if v:
                return v
            time.sleep(2)
        raise AssertionError(f"timed out: {what or check}\n{self.logs()}")

    def token(self) -> str:
        if self._token is None:
            req = urllib.request.Request(
                f"{self.url}/auth/token",
                data=json.dumps({"username": USER, "password": PASSWORD}).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req) as r:
                self._token = str(json.load(r)["access_token"])
        return self._token

    def _get(self, path: str, auth: bool = True) -> Any:
        headers = {"Authorization": f"Bearer {self.token()}"} if auth else {}
        try:
            with urllib.request.urlopen(
                urllib.request.Request(self.url + path, headers=headers), timeout=10
            ) as r:
                return json.load(r)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def api(self, method: str, path: str, body: Any = None) -> Any:
        req = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {self.token()}",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
            return json.loads(text) if text else None

    def airflow(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        exe = str(Path(sys.executable).parent / "airflow")
        return subprocess.run(
            [exe, *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def stop(self) -> None:
        """End each service and what it started (executor workers, the log server)."""
        for _, p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for _, p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)  # stragglers of the group
