"""What can be run of docker-compose.yaml on a machine without a Docker engine or a registry
(a manual check, docs/deployment.md "Running on docker compose"): every service of the compose
file that runs the project image, each with its own command, entrypoint, environment, volumes,
user and init process as the file gives them (`.env` and `${VAR:-default}` interpolated as
Compose does), in podman containers on a network of their own where each is reachable by its
service name, as on the compose network. What no image can be pulled for is stood in for:
PostgreSQL runs on this host (Debian's, a throwaway instance, the compose file's user, password
and `deploy/postgres-init.sql`) and the containers reach it by the name `postgres`; Redis and
MinIO are in profiles a plain `up` leaves out.

    .venv/bin/python deploy/podman_smoke.py [--image localhost/recon:latest]

It checks that airflow-init completes; that every long-running service passes its own health
check (the compose file's `test`, run in its container); that the dag-processor container
parsed the demo pipelines' DAGs; that recon-demo's command succeeds with every table equal to
the source; and that a demo DAG, unpaused, runs its first hour through the scheduler container
(LocalExecutor) and the api-server's execution API to success. Exit 0 when all hold.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "recon-smoke"
NETWORK = f"{PREFIX}-net"
LONG_RUNNING = (
    "spark-master", "spark-worker-1", "spark-worker-2", "airflow-apiserver",
    "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer",
)  # fmt: skip
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$\$")


def say(text: str) -> None:
    print(f"podman-smoke: {text}", flush=True)


def sh(*argv: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise SystemExit(f"podman-smoke: {' '.join(argv[:4])} failed:\n{r.stdout}{r.stderr}")
    return r


def dotenv() -> dict[str, str]:
    """The `.env` file's variables, as Compose reads them."""
    out = {}
    for line in (ROOT / ".env").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def interpolate(node: Any, env: dict[str, str], unset: set[str]) -> Any:
    """`${VAR}`, `${VAR:-default}` and `$$` as Compose reads them; a variable with neither a
    value nor a default is added to `unset`."""
    if isinstance(node, dict):
        return {k: interpolate(v, env, unset) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolate(v, env, unset) for v in node]
    if not isinstance(node, str):
        return node

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group(1), m.group(2)
        if env.get(name):
            return env[name]
        if default is None:
            unset.add(name)
        return default or ""

    return _VAR.sub(sub, node)


def compose_file(env: dict[str, str], unset: set[str]) -> dict[str, Any]:
    """docker-compose.yaml, interpolated from `env`."""
    doc = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    return dict(interpolate(doc, env, unset))


class HostPostgres:
    """Debian's PostgreSQL as the compose file's `postgres` service: its user, password,
    database and init script, listening on the podman network's gateway."""

    def __init__(self, user: str, password: str, db: str, gateway: str, subnet: str) -> None:
        self.base = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-pg-"))
        pw = pwd.getpwnam("postgres")
        os.chown(self.base, pw.pw_uid, pw.pw_gid)
        self.run_as = ["runuser", "-u", "postgres", "--"]
        tool = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))[-1].rsplit("/", 1)[0]
        pwfile = self.base / "pw"
        pwfile.write_text(password)
        os.chown(pwfile, pw.pw_uid, -1)
        data = self.base / "data"
        sh(*self.run_as, f"{tool}/initdb", "-D", str(data), "-U", user, f"--pwfile={pwfile}",
           "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8")  # fmt: skip
        with open(data / "pg_hba.conf", "a") as f:
            f.write(f"host all all {subnet} scram-sha-256\n")
        # every address: the network's bridge comes up with its first container (pg_hba.conf
        # lets in only the network's subnet and this host)
        opts = f"-p 5432 -k {self.base} -c listen_addresses=0.0.0.0"
        sh(*self.run_as, f"{tool}/pg_ctl", "-D", str(data), "-o", opts, "-l",
           str(self.base / "log"), "-w", "start")  # fmt: skip
        self.stop_cmd = [*self.run_as, f"{tool}/pg_ctl", "-D", str(data), "-m", "fast", "stop"]
        psql = [*self.run_as, "env", f"PGPASSWORD={password}", f"{tool}/psql", "-v",
                "ON_ERROR_STOP=1", "-h", str(self.base), "-U", user, "-d", "postgres"]  # fmt: skip
        sh(*psql, "-c", f"CREATE DATABASE {db}")
        sh(*psql, "-f", str(ROOT / "deploy" / "postgres-init.sql"))

    def stop(self) -> None:
        sh(*self.stop_cmd, check=False)
        shutil.rmtree(self.base, ignore_errors=True)


def run_args(name: str, svc: dict[str, Any], image: str, gateway: str) -> list[str]:
    """`podman run` of one compose service: its environment, volumes, user, init, entrypoint."""
    args = ["--name", f"{PREFIX}-{name}", "--network", NETWORK, "--network-alias", name,
            "--hostname", name, "--add-host", f"postgres:{gateway}"]  # fmt: skip
    for k, v in (svc.get("environment") or {}).items():
        args += ["-e", f"{k}={'' if v is None else v}"]
    for vol in svc.get("volumes") or []:
        src, dest, *mode = vol.split(":")
        src = str((ROOT / src).resolve()) if src.startswith(".") else f"{PREFIX}-{src}"
        args += ["-v", ":".join([src, dest, *mode])]
    if svc.get("user"):
        args += ["--user", svc["user"]]
    if svc.get("init"):
        args.append("--init")
    if svc.get("entrypoint"):
        args += ["--entrypoint", svc["entrypoint"]]
    command = svc.get("command") or []
    return [*args, image, *(shlex.split(command) if isinstance(command, str) else command)]


def healthy(name: str, svc: dict[str, Any]) -> bool:
    """The compose file's health check of `name`, run in its container."""
    test = svc["healthcheck"]["test"]
    argv = test[1:] if test[0] == "CMD" else ["sh", "-c", test[1]]
    r = sh("podman", "exec", f"{PREFIX}-{name}", *argv, check=False, timeout=120)
    return r.returncode == 0


def wait(what: str, check: Any, timeout: float) -> Any:
    end = time.time() + timeout
    while time.time() < end:
        got = check()
        if got:
            return got
        time.sleep(5)
    raise SystemExit(f"podman-smoke: timed out waiting for {what}")


def airflow(*args: str) -> Any:
    r = sh("podman", "exec", f"{PREFIX}-airflow-apiserver", "airflow", *args, "-o", "json",
           timeout=300)  # fmt: skip
    # the JSON array is the line that starts one (log lines come before it)
    line = next((x for x in r.stdout.splitlines() if x.startswith(("[{", "[]"))), "[]")
    return json.loads(line)


def cleanup(pg: HostPostgres | None) -> None:
    names = sh("podman", "ps", "-a", "--format", "{{.Names}}", check=False).stdout.split()
    mine = [n for n in names if n.startswith(f"{PREFIX}-")]
    if mine:
        sh("podman", "rm", "-f", "-t", "5", *mine, check=False)
    for vol in ("recon-data", "airflow-logs"):
        sh("podman", "volume", "rm", "-f", f"{PREFIX}-{vol}", check=False)
    sh("podman", "network", "rm", "-f", NETWORK, check=False)
    if pg is not None:
        pg.stop()


def smoke(image: str) -> None:
    services = compose_file({**dotenv(), **os.environ}, set())["services"]
    sh("podman", "network", "create", NETWORK)
    net = json.loads(sh("podman", "network", "inspect", NETWORK).stdout)[0]["subnets"][0]
    gateway, subnet = net["gateway"], net["subnet"]
    pg_env = services["postgres"]["environment"]
    pg = HostPostgres(pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"],
                      pg_env["POSTGRES_DB"], gateway, subnet)  # fmt: skip
    try:
        say(f"PostgreSQL on this host as `postgres` ({gateway}:5432); network {NETWORK} {subnet}")
        for vol in ("recon-data", "airflow-logs"):
            sh("podman", "volume", "create", f"{PREFIX}-{vol}")
        init = services["airflow-init"]
        r = sh("podman", "run", "--rm", *run_args("airflow-init", init, image, gateway),
               check=False, timeout=900)  # fmt: skip
        if r.returncode != 0:
            raise SystemExit(
                f"podman-smoke: airflow-init failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
            )
        say("airflow-init completed (database migrated, recon_spark pool, admin user)")
        for name in LONG_RUNNING:
            sh("podman", "run", "-d", *run_args(name, services[name], image, gateway))
        for name in LONG_RUNNING:
            wait(f"{name} healthy", lambda n=name: healthy(n, services[n]), 300)
            say(f"{name}: healthy (its compose health check)")
        dags = wait(
            "the demo DAGs parsed",
            lambda: [
                d["dag_id"]
                for d in airflow("dags", "list")
                if d["dag_id"].startswith("recon_demo_")
            ],
            300,
        )
        say(f"dag-processor parsed {len(dags)} demo DAGs: {', '.join(sorted(dags))}")
        demo = services["recon-demo"]
        r = sh("podman", "run", "--rm", *run_args("recon-demo", demo, image, gateway),
               check=False, timeout=3600)  # fmt: skip
        print(r.stdout[-2500:], flush=True)
        rows = [x for x in r.stdout.splitlines() if x.startswith("demo_")]
        if r.returncode != 0 or len(rows) != 6 or not all(" equal " in x for x in rows):
            raise SystemExit(
                f"podman-smoke: recon-demo failed ({r.returncode}):\n{r.stderr[-3000:]}"
            )
        say("recon-demo: six pipelines, every table equal to the source")
        dag = "recon_demo_canal_json"
        sh("podman", "exec", f"{PREFIX}-airflow-apiserver", "airflow", "dags", "unpause", dag)

        def first_scheduled() -> dict[str, Any] | None:
            runs = [
                x
                for x in airflow("dags", "list-runs", dag)
                if x["run_id"].startswith("scheduled__")
            ]
            done = [x for x in runs if x["state"] in ("success", "failed")]
            return done[0] if done else None

        run = wait("a scheduled run of the unpaused demo DAG", first_scheduled, 1800)
        sh("podman", "exec", f"{PREFIX}-airflow-apiserver", "airflow", "dags", "pause", dag)
        if run["state"] != "success":
            raise SystemExit(f"podman-smoke: scheduled run {run['run_id']}: {run['state']}")
        say(f"{dag}: scheduled run {run['run_id']} succeeded in the scheduler container")
    finally:
        cleanup(pg)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--image", default="localhost/recon:latest")
    args = p.parse_args()
    if shutil.which("podman") is None:
        print("podman-smoke: no podman here (Debian: apt-get install podman netavark aardvark-dns catatonit)",
              file=sys.stderr)  # fmt: skip
        return 2
    cleanup(None)
    smoke(args.image)
    say("every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
