"""spark-submit entry point for the decode stage of one pipeline-hour (wiring only).

spark-submit jobs/decode.py --pipeline pipelines/shop.yaml --hour 2026-11-20T05 [--run-id ID]
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="jobs/decode.py", description=__doc__)
    p.add_argument("--pipeline", required=True)
    p.add_argument("--hour", required=True)
    p.add_argument("--run-id", default=None)
    p.add_argument("--allow-incomplete", action="store_true")
    args = p.parse_args(argv)
    from recon.cli import main as recon_main

    cmd = ["decode", "--pipeline", args.pipeline, "--hour", args.hour]
    if args.run_id:
        cmd += ["--run-id", args.run_id]
    if args.allow_incomplete:
        cmd.append("--allow-incomplete")
    return recon_main(cmd)


if __name__ == "__main__":
    sys.exit(main())
