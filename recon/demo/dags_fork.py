"""`airflow dags test` runs forked from one interpreter that imported Airflow once (`recon demo`).

Each `airflow dags test` process spends about a fifth of a demo DAG run's CPU before it runs a
task, much of it importing Airflow's CLI and execution API (measured: ~2 CPU-seconds of ~9 per
run). `recon demo` runs six of them against one Airflow home, so it starts this server once
(`python -m recon.demo.dags_fork`, with that home's environment): it imports those modules,
then for each request forks a child that runs Airflow's own command line, `airflow.__main__`,
with the request's arguments and its output in the request's log file, exactly as the
`airflow` executable would. Airflow forks itself the same way (its executors, its task
supervisor) and resets its database engine in a forked child (`airflow.settings`).

Protocol (one JSON object per line): with `--after-migrate`, out `{"configured": true}` once
the Airflow home's config file is written, in `{"migrated": true}` once the caller has
migrated the database (the imports overlap the migration); out `{"ready": true}`
once Airflow is imported and its first writes are done; in
`{"id": N, "argv": [...], "log": PATH}`, out `{"id": N, "rc": R}` when that run's process ends. The server ends when its input closes and
its runs are done; SIGTERM ends it and its runs.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import traceback
from types import FrameType


def _preload() -> None:
    """What every `airflow dags test` imports before its first task (no database yet)."""
    import airflow.__main__  # noqa: F401
    import airflow.api_fastapi.execution_api.app  # noqa: F401
    import airflow.cli.commands.dag_command  # noqa: F401
    import airflow.dag_processing.dagbag  # noqa: F401
    import airflow.sdk.execution_time.supervisor  # noqa: F401
    import alembic.runtime.environment  # noqa: F401 - each run checks the migrations
    from airflow.cli import cli_parser

    import recon.airflow.dag_factory  # noqa: F401 - what the DAG file imports
    import recon.ops.sizing  # noqa: F401 - what the stages' commands render with

    cli_parser.get_parser()
    try:
        _warm_execution_api()
    except Exception as err:  # noqa: BLE001 - a saving only: each run then builds its own
        print(f"dags_fork: execution API not built ahead ({type(err).__name__}: {err})", flush=True)


def _first_writes() -> None:
    """What every `airflow dags test` writes first, done once here (the database migrated)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db

    # What each `dags test` writes first (the DAG bundles, then every DAG of the bundle), once,
    # here: two runs starting together on a new metadata database would insert the same rows
    # at once (the second fails on a unique constraint); after this they only read or update.
    # The children get fresh database connections (`airflow.settings` disposes the engine in a
    # forked child).
    manager = DagBundlesManager()
    manager.sync_bundles_to_db()
    for bundle in manager.get_all_dag_bundles():
        bundle.initialize()
        bag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name)
        sync_bag_to_db(bag, bundle.name, bundle.version)


def _warm_execution_api() -> None:
    """Build the in-process execution API's app once, routes and all, for every run to reuse.

    `airflow dags test` talks to an in-process execution API (one per process, from
    `in_process_api_server`, cached) whose app, a Cadwyn app, builds its versioned routes on
    its first request: ~3.6 s of the first task of every run, most of a small DAG run's
    start-up (py-spy, session 22). Built here, each forked run finds it in that cache and
    starts its own event loop and database connections on its first request. No request is
    made here, so no thread runs at fork time. `_cadwyn_initialize` is Cadwyn's own step;
    where it is missing (another version) the routes are built by each run, as before."""
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    app = in_process_api_server().app
    if getattr(app, "_cadwyn_initialized", None) is False:
        app._cadwyn_initialize()


def _child(argv: list[str], log: str, reply_fd: int) -> None:
    """In the forked child: Airflow's command line with `argv`, its output in `log`."""
    os.close(reply_fd)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.close(null)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.argv = ["airflow", *argv]
    code = 0
    try:
        from airflow.__main__ import main

        main()
    except SystemExit as err:
        code = err.code if isinstance(err.code, int) else (0 if err.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _wait_for_migrated() -> bool:
    """`--after-migrate`: the caller migrates the database while this process imports; it
    sends one line when done. False: its input closed first (the migration failed)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(0, 1)  # byte by byte: what follows the line is the requests'
        if not chunk:
            return False
        line += chunk
    return bool(json.loads(line).get("migrated"))


def serve() -> int:
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what Airflow prints here (its import warnings) goes to stderr, not the replies
    after_migrate = "--after-migrate" in sys.argv[1:]
    if after_migrate:
        # the Airflow home's config file first, as `airflow` itself writes it when missing
        # (with new secret keys): then the migration reads the keys this process holds
        from airflow.configuration import write_default_airflow_configuration_if_needed

        write_default_airflow_configuration_if_needed()
        reply.write(json.dumps({"configured": True}) + "\n")
    _preload()
    if after_migrate and not _wait_for_migrated():
        return 0
    _first_writes()
    reply.write(json.dumps({"ready": True}) + "\n")
    runs: dict[int, int] = {}  # pid -> request id

    def stop(_sig: int, _frame: FrameType | None) -> None:
        for pid in runs:
            os.kill(pid, signal.SIGTERM)
        os._exit(1)

    signal.signal(signal.SIGTERM, stop)
    pending, open_input = b"", True
    while open_input or runs:
        ready, _, _ = select.select([0] if open_input else [], [], [], 0.1)
        if ready:
            chunk = os.read(0, 65536)
            open_input = bool(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    req = json.loads(line)
                    pid = os.fork()
                    if pid == 0:
                        _child([str(a) for a in req["argv"]], str(req["log"]), reply.fileno())
                    runs[pid] = int(req["id"])
        while runs:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            rid = runs.pop(pid, None)
            if rid is not None:
                reply.write(json.dumps({"id": rid, "rc": os.waitstatus_to_exitcode(status)}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(serve())
