"""spark-submit entry point for one stage over an hour range (wiring only; what the DAGs run).

spark-submit jobs/stage.py decode|merge|audit --pipeline F --from H [--to H] [--run-id ID]
    [--tables DB.T,...] [--rebuild true|false]

Hours run in order. `merge --tables` merges only those tables. `merge --rebuild true` drops
their merge state and merges again, from the snapshot on, every decoded hour since the
pipeline's start (the run's hours and any later ones included), re-auditing each. `audit` exits
1 after writing every report if any verdict is `fail`, so the Airflow task shows red.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="jobs/stage.py", description=__doc__)
    p.add_argument("stage", choices=["decode", "merge", "audit"])
    p.add_argument("--pipeline", required=True)
    p.add_argument("--from", dest="first", required=True)
    p.add_argument("--to", dest="last", default=None)
    p.add_argument("--run-id", default=None)
    p.add_argument("--allow-incomplete", action="store_true")
    p.add_argument("--tables", default="", help="merge: only these tables (comma-separated)")
    p.add_argument("--rebuild", choices=["true", "false"], default="false")
    args = p.parse_args(argv)
    from recon.cli import main as recon_main
    from recon.errors import ReconError
    from recon.hours import format_hour, hour_range, parse_hour

    try:
        h0 = parse_hour(args.first, "--from")
        hours = hour_range(h0, parse_hour(args.last, "--to") if args.last else h0)
    except ReconError as err:
        print(f"jobs/stage.py: {err}", file=sys.stderr)
        return 2
    tables = [t for t in args.tables.split(",") if t] or None
    if args.stage == "merge" and args.rebuild == "true":
        from recon.ops.run import rebuild

        try:  # every decoded hour, the run's own and any later ones: the tables stay current
            done = {r["hour"] for r in rebuild(args.pipeline, None, tables, args.run_id)}
        except ReconError as err:
            print(f"jobs/stage.py: {err}", file=sys.stderr)
            return 2
        missing = [format_hour(h) for h in hours if format_hour(h) not in done]
        if missing:
            print(
                f"jobs/stage.py: hour {missing[0]} is not decoded; decode it first", file=sys.stderr
            )
            return 2
        return 0
    worst = 0
    for h in hours:
        cmd = [args.stage, "--pipeline", args.pipeline, "--hour", format_hour(h)]
        if args.run_id:
            cmd += ["--run-id", f"{args.run_id}_{format_hour(h)}"]  # one id per hour
        if args.allow_incomplete and args.stage == "decode":
            cmd.append("--allow-incomplete")
        if args.tables and args.stage == "merge":
            cmd += ["--tables", args.tables]
        rc = recon_main(cmd)
        if rc == 2 or (rc and args.stage != "audit"):
            return rc  # a stage that did not finish: later hours must not run past it
        worst = max(worst, rc)
    return worst


if __name__ == "__main__":
    sys.exit(main())
