"""spark-submit entry point of a DAG run's Spark application (its setup task starts it): one
driver that runs the run's stages as `recon/jobs/stage.py` would, one at a time, on a Unix socket
(`recon.ops.app_server`), until the run's teardown stops it or it is idle too long.

spark-submit recon/jobs/app.py --socket PATH [--idle-seconds S] [--app-name NAME]
"""

from __future__ import annotations

import argparse
import sys

from recon.appsocket import IDLE_S
from recon.jobs.stage import main as stage_main  # before pyspark: it puts the installed one first
from recon.ops.app_server import serve


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="recon/jobs/app.py", description=__doc__)
    p.add_argument("--socket", required=True, help="the Unix socket to serve on")
    p.add_argument("--idle-seconds", type=float, default=IDLE_S)
    p.add_argument("--app-name", default="recon-app", help="the Spark application's name")
    args = p.parse_args(argv)
    return serve(stage_main, args.socket, args.idle_seconds, args.app_name)


if __name__ == "__main__":
    sys.exit(main())
