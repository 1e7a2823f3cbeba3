"""One Spark application for a DAG run's stages (README "One Spark application per DAG run").

A run's setup task starts `recon/jobs/app.py` under spark-submit: a driver that serves the stages on
a Unix socket. Each stage task then hands its `recon/jobs/stage.py` arguments to that driver instead
of starting a JVM, a Spark session and the library's imports of its own (on a small hour most of
a stage's time), and the run's teardown task stops it. The stages run one at a time, exactly as
`recon/jobs/stage.py` runs them; the driver's output (the stage's lines and Spark's own) goes to one
log file, whose lines written during a stage the task copies into its own log.

Whatever goes wrong with the application falls back to spark-submit, never to a lost stage: a
task that cannot reach it (gone, idle too long, another worker's) runs spark-submit as before;
a stage the application dies in fails, and its retry, which cannot reach it, runs spark-submit.

The wire (and the client side the Airflow tasks use) is `recon.appsocket`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import traceback
from collections.abc import Callable

from recon.appsocket import END_MARK, IDLE_S, read_line, send
from recon.spark.session import get_spark


def serve(
    stage_main: Callable[[list[str]], int],
    sock_path: str,
    idle_s: float = IDLE_S,
    app_name: str = "recon-app",
) -> int:
    """The driver's loop: one request at a time, `{"argv": [...]}` (a stage: `stage_main`, which
    is `recon/jobs/stage.py`'s, answered with its exit code) or `{"stop": true}`; exits after
    `idle_s` without a request."""
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("RECON_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    get_spark(app_name)  # up before the socket exists: its presence means ready
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(8)
    srv.settimeout(idle_s)
    print(f"recon app: serving the run's stages on {sock_path}", flush=True)
    try:
        while True:
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                print(f"recon app: no request for {idle_s:.0f} s, exiting", flush=True)
                return 0
            with conn:
                req = read_line(conn)
                if req.get("stop"):
                    send(conn, {"rc": 0})
                    print("recon app: stopped by the run's teardown", flush=True)
                    return 0
                argv = req.get("argv")
                if isinstance(argv, list):  # else a readiness probe, or garbage: no stage
                    send(conn, {"rc": _run(stage_main, [str(a) for a in argv])})
    finally:
        srv.close()
        with contextlib.suppress(OSError):
            os.unlink(sock_path)


def _run(stage_main: Callable[[list[str]], int], argv: list[str]) -> int:
    print(f"recon app: recon/jobs/stage.py {' '.join(argv)}", flush=True)
    try:
        rc = stage_main(argv)
    except SystemExit as err:  # argparse
        rc = err.code if isinstance(err.code, int) else 1
    except Exception:  # what spark-submit would print before exiting 1
        traceback.print_exc()
        rc = 1
    sys.stderr.flush()
    print(f"{END_MARK}, exit code {int(rc or 0)}", flush=True)
    return int(rc or 0)
