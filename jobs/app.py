"""spark-submit entry point of a DAG run's Spark application (its setup task starts it): one
driver that runs the run's stages as `jobs/stage.py` would, one at a time, on a Unix socket
(`recon.ops.app_server`), until the run's teardown stops it or it is idle too long.

spark-submit jobs/app.py --socket PATH [--idle-seconds S] [--app-name NAME]
"""

from __future__ import annotations

import argparse
import sys

from stage import main as stage_main  # jobs/stage.py, beside this file

from recon.appsocket import IDLE_S
from recon.ops.app_server import serve


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="jobs/app.py", description=__doc__)
    p.add_argument("--socket", required=True, help="the Unix socket to serve on")
    p.add_argument("--idle-seconds", type=float, default=IDLE_S)
    p.add_argument("--app-name", default="recon-app", help="the Spark application's name")
    args = p.parse_args(argv)
    return serve(stage_main, args.socket, args.idle_seconds, args.app_name)


if __name__ == "__main__":
    sys.exit(main())
