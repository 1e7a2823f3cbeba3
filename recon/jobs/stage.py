"""spark-submit entry point for one stage over an hour range (wiring only; what the DAGs run).

spark-submit recon/jobs/stage.py decode|merge|audit --pipeline F --from H [--to H] [--run-id ID]
    [--tables DB.T,...] [--rebuild true|false]

Hours run in order, each with its own run id (`<ID>_<hour>`). `merge --tables` merges only those
tables. `merge --rebuild true` drops their merge state and merges again, from the snapshot on,
every decoded hour since the pipeline's start (the run's hours and any later ones included),
re-auditing each. `audit` exits 3 after writing every report if any verdict is `fail`, so the
Airflow task shows red without a retry. A user error is one line and exit 2; anything else
(an infrastructure error) exits 1 with its traceback, and the task retries it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from recon.sparkpath import prefer_installed_pyspark

prefer_installed_pyspark()  # before anything imports pyspark (`recon.sparkpath`)

from recon.cli.output import Printer  # noqa: E402
from recon.config import load_config  # noqa: E402
from recon.errors import EXIT_USER_ERROR, EXIT_VERDICT_FAIL, ReconError  # noqa: E402
from recon.hours import format_hour, hour_range, parse_hour  # noqa: E402
from recon.ops.lock import DAG_WAIT_S  # noqa: E402
from recon.ops.rebuild import rebuild  # noqa: E402
from recon.ops.run import run_stage  # noqa: E402
from recon.spark.session import get_spark  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="recon/jobs/stage.py", description=__doc__)
    p.add_argument("stage", choices=["decode", "merge", "audit"])
    p.add_argument("--pipeline", required=True)
    p.add_argument("--from", dest="first", required=True)
    p.add_argument("--to", dest="last", default=None)
    p.add_argument("--run-id", default=None)
    # the DAG passes true or false (its run's `allow_incomplete` param); alone: true
    p.add_argument("--allow-incomplete", nargs="?", const="true", default="false",
                   choices=["true", "false"])  # fmt: skip
    p.add_argument("--tables", default="", help="merge: only these tables (comma-separated)")
    p.add_argument("--rebuild", choices=["true", "false"], default="false")
    p.add_argument("--summary-file", default=None, help="also write the summary line's JSON here")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args.pipeline)
    h0 = parse_hour(args.first, "--from")
    hours = hour_range(h0, parse_hour(args.last, "--to") if args.last else h0)
    tables = [t for t in args.tables.split(",") if t] or None
    if args.stage == "merge" and args.rebuild == "true":
        # every decoded hour, the run's own and any later ones: the tables stay current
        got = rebuild(args.pipeline, None, tables, args.run_id, Printer(), lock_wait=DAG_WAIT_S)
        done = {r["hour"] for r in got}
        missing = [format_hour(h) for h in hours if format_hour(h) not in done]
        if missing:
            raise ReconError(f"hour {missing[0]} is not decoded; decode it first")
        return 0
    spark = get_spark(f"recon-{args.stage}-{cfg.name}")
    summary: dict[str, Any] = {}
    failed = run_stage(
        args.stage,
        spark,
        cfg,
        hours,
        args.run_id,
        tables,
        args.allow_incomplete == "true",
        Printer(),
        lock_wait=DAG_WAIT_S,  # a backfill's runs queue behind each other
        summary=summary,
    )
    summary["failed_hours"] = failed
    write_summary(summary, args.summary_file)
    return EXIT_VERDICT_FAIL if failed else 0


SUMMARY_PREFIX = "recon-summary "


def write_summary(summary: dict[str, Any], path: str | None) -> None:
    """One structured line per stage run (grep `recon-summary`), and the same JSON in `path`
    for the Airflow task, which logs it ahead of spark-submit's own output."""
    text = json.dumps(summary, sort_keys=True)
    print(SUMMARY_PREFIX + text, flush=True)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not _configure_logging():
        return 2
    try:
        return run(args)
    except ReconError as err:
        print(f"recon/jobs/stage.py: {err}", file=sys.stderr)
        return EXIT_USER_ERROR


def _configure_logging() -> bool:
    """The library's loggers (recon.decode, recon.merge, recon.ops, ...) on stderr, once per
    process (spark-submit runs this file as a script); False for a bad RECON_LOG_LEVEL."""
    level = os.environ.get("RECON_LOG_LEVEL", "INFO").upper()
    if not isinstance(logging.getLevelName(level), int):
        print(
            f"recon/jobs/stage.py: RECON_LOG_LEVEL={level!r} is not a log level; use DEBUG, INFO, "
            "WARNING or ERROR",
            file=sys.stderr,
        )
        return False
    if __name__ == "__main__":  # not when a test calls main(): pytest owns its streams
        logging.basicConfig(
            stream=sys.stderr, level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    return True


if __name__ == "__main__":
    sys.exit(main())
