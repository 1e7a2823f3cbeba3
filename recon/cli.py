"""`recon`: the command line (contract section 3). User errors print one line, never a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from recon.errors import ReconError


def _add_pipeline(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pipeline", required=True, metavar="FILE", help="pipeline YAML file")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recon", description="Reconcile MySQL/MariaDB CDC streams dumped from Kafka."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("validate", help="check pipeline configs (a file or a folder of them)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="pipeline YAML file or folder")

    p = sub.add_parser("decode", help="decode one pipeline-hour of raw dumps into canonical events")
    _add_pipeline(p)
    p.add_argument("--hour", required=True, metavar="HOUR", help="YYYY-MM-DDTHH (UTC)")
    p.add_argument("--run-id", default=None, help="identifier recorded in the outputs")
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="decode an hour whose _SUCCESS marker is missing",
    )

    p = sub.add_parser("run", help="run every stage for each hour in order, on a local Spark")
    _add_pipeline(p)
    p.add_argument("--from", dest="first", required=True, metavar="HOUR", help="YYYY-MM-DDTHH")
    p.add_argument(
        "--to",
        dest="last",
        default=None,
        metavar="HOUR",
        help="last hour, inclusive (default: --from)",
    )
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="process hours whose _SUCCESS marker is missing",
    )

    p = sub.add_parser(
        "merge", help="merge one decoded pipeline-hour into the state and publish the tables"
    )
    _add_pipeline(p)
    p.add_argument("--hour", required=True, metavar="HOUR", help="YYYY-MM-DDTHH (UTC)")
    p.add_argument("--run-id", default=None, help="identifier recorded in the outputs")

    p = sub.add_parser("export", help="write one published table as JSON Lines (sorted by key)")
    _add_pipeline(p)
    p.add_argument("--table", required=True, metavar="DB.TABLE", help="a configured table")
    p.add_argument("--out", required=True, metavar="FILE", help="JSON Lines file to write")
    p.add_argument(
        "--with-metadata", action="store_true", help="include the _cdc_ metadata columns"
    )
    v = p.add_mutually_exclusive_group()
    v.add_argument("--as-of-hour", metavar="HOUR", help="the version published for this hour")
    v.add_argument("--snapshot-id", type=int, metavar="ID", help="an Iceberg snapshot id")

    p = sub.add_parser("history", help="list the published versions of a table")
    _add_pipeline(p)
    p.add_argument("--table", required=True, metavar="DB.TABLE", help="a configured table")

    p = sub.add_parser("demo", help="make a sample dump of every format, run it, print a summary")
    p.add_argument("--hours", type=int, default=3, help="how many hours of changes (default 3)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return int(_dispatch(args) or 0)
    except ReconError as err:
        print(f"recon {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"recon {args.command}: interrupted", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "validate":
        return _validate(args.paths)
    if args.command == "decode":
        from recon.config import load_config
        from recon.hours import parse_hour
        from recon.runner import print_counters
        from recon.spark.decode_stage import decode_hour
        from recon.spark.session import get_spark

        cfg = load_config(args.pipeline)
        hour = parse_hour(args.hour, "--hour")
        counters = decode_hour(
            get_spark(f"recon-decode-{cfg.name}"), cfg, hour, args.run_id, args.allow_incomplete
        )
        print_counters(counters)
        return 0
    if args.command == "run":
        from recon.runner import run_hours

        run_hours(args.pipeline, args.first, args.last, args.allow_incomplete)
        return 0
    if args.command == "merge":
        from recon.config import load_config
        from recon.hours import parse_hour
        from recon.runner import print_merge
        from recon.spark.merge_stage import merge_hour
        from recon.spark.session import get_spark

        cfg = load_config(args.pipeline)
        hour = parse_hour(args.hour, "--hour")
        spark = get_spark(f"recon-merge-{cfg.name}")
        print_merge(merge_hour(spark, cfg, hour, args.run_id, buckets=cfg.buckets))
        return 0
    if args.command == "export":
        from recon.config import load_config
        from recon.hours import format_hour, parse_hour
        from recon.publish import export_rows, write_export

        cfg = load_config(args.pipeline)
        as_of = (
            format_hour(parse_hour(args.as_of_hour, "--as-of-hour")) if args.as_of_hour else None
        )
        rows = export_rows(cfg, args.table, args.with_metadata, args.snapshot_id, as_of)
        n = write_export(rows, Path(args.out))
        print(f"{n} rows of {args.table} written to {args.out}")
        return 0
    if args.command == "history":
        from recon.config import load_config
        from recon.publish import history, load_table

        cfg = load_config(args.pipeline)
        for h in history(load_table(cfg, args.table)):
            print(
                f"{h['snapshot_id']:>20}  {h['committed_at']}  hour {h['hour']}  "
                f"run {h['run_id']}  schema v{h['schema_version']}  {h['records']} rows"
            )
        return 0
    if args.command == "demo":
        from recon.demo import run_demo

        if args.hours < 2:
            raise ReconError("--hours must be at least 2, so that something straddles an hour")
        run_demo(args.hours)
        return 0
    raise ReconError(f"unknown command {args.command}")


def _validate(paths: list[str]) -> int:
    from recon.config import load_config, load_folder

    bad = 0
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            good, errors = load_folder(p)
            for cfg in good:
                print(f"ok  {cfg.source_file}  (dag recon_{cfg.name}, format {cfg.format})")
            for _, msg in errors.items():
                print(f"bad {msg}")
            bad += len(errors)
        else:
            try:
                cfg = load_config(p)
                print(f"ok  {cfg.source_file}  (dag recon_{cfg.name}, format {cfg.format})")
            except ReconError as err:
                print(f"bad {err}")
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
