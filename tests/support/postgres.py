"""A throwaway PostgreSQL server from Debian's packages, in a temp dir, for tests that need what
production runs on (Airflow's metadata database, the Iceberg SQL catalog).

PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user the Debian
package creates, in a folder it owns. Password authentication over TCP on 127.0.0.1 only.
Stopped by PID (`pg_ctl stop`, then the postmaster's PID if it lingers)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.airflow_services import free_port


def _bin(tool: str) -> str:
    found = shutil.which(tool) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"))), None
    )
    if not found:
        raise RuntimeError(
            f"{tool} not found: install Debian's postgresql (scripts/setup.sh does it when run "
            "as root)"
        )
    return found


class Postgres:
    """`start()` runs the server; `uri(db)` is a SQLAlchemy URI with the password in it."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="recon-pg-"))
        self.data = self.base / "data"
        self.port = free_port()
        self.user = "recon"
        self.password = secrets.token_hex(8)
        self._as: list[str] = []

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._as, *args], check=True, capture_output=True, text=True, timeout=120
        )

    def start(self) -> Postgres:
        if os.geteuid() == 0:  # initdb and postgres refuse root
            pw = pwd.getpwnam("postgres")
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        pwfile = self.base / "pw"
        pwfile.write_text(self.password)
        if self._as:
            os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
        self._run(
            _bin("initdb"), "-D", str(self.data), "-U", self.user, f"--pwfile={pwfile}",
            "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8",
        )  # fmt: skip
        opts = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            _bin("pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            opts,
            "-l",
            str(self.base / "log"),
            "-w",
            "start",
        )
        for db in ("airflow", "iceberg"):
            self.sql(f"CREATE DATABASE {db}")
        return self

    def sql(self, statement: str, db: str = "postgres") -> str:
        env = dict(os.environ, PGPASSWORD=self.password)
        r = subprocess.run(
            [_bin("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", db,
             "-tAc", statement],
            env=env, check=True, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return r.stdout.strip()

    def uri(self, db: str, password: str | None = None) -> str:
        pw = self.password if password is None else password
        return f"postgresql+psycopg2://{self.user}:{pw}@127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        pid_file = self.data / "postmaster.pid"
        pid = int(pid_file.read_text().split()[0]) if pid_file.is_file() else None
        with contextlib.suppress(subprocess.SubprocessError):
            self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        if pid is not None:
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.base, ignore_errors=True)
