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
    p.add_argument("--tables", metavar="DB.T,...", help="only these tables (default: all)")

    p = sub.add_parser(
        "rebuild",
        help="drop the merge state and merge every decoded hour again, from the snapshot on",
    )
    _add_pipeline(p)
    p.add_argument("--to", dest="last", metavar="HOUR", help="last hour (default: last decoded)")
    p.add_argument("--tables", metavar="DB.T,...", help="only these tables (default: all)")
    p.add_argument("--run-id", default=None, help="identifier recorded in the outputs")

    p = sub.add_parser(
        "rollback",
        help="roll the tables and the merge state back to the end of an hour (later hours undone)",
    )
    _add_pipeline(p)
    p.add_argument("--to-hour", required=True, metavar="HOUR", help="YYYY-MM-DDTHH (UTC)")

    p = sub.add_parser(
        "expire",
        help="keep the last N hours of versions and merge states, delete older files",
    )
    _add_pipeline(p)
    p.add_argument(
        "--keep-hours", type=int, default=168, help="hours of history to keep (default 168)"
    )

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

    p = sub.add_parser("audit", help="(re)write the audit report of a merged hour")
    _add_pipeline(p)
    p.add_argument("--hour", required=True, metavar="YYYY-MM-DDTHH")
    p.add_argument("--run-id", default=None, help="the run rewriting the report (recorded)")

    p = sub.add_parser("report", help="print the audit summary of an hour (exit 1 on fail)")
    _add_pipeline(p)
    p.add_argument("--hour", required=True, metavar="YYYY-MM-DDTHH")

    p = sub.add_parser(
        "reconcile", help="compare a published table with its source (snapshot or JDBC)"
    )
    _add_pipeline(p)
    p.add_argument("--table", required=True, metavar="DB.TABLE", help="a configured table")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--snapshot", metavar="DIR", help="an out-of-band snapshot taken later")
    src.add_argument("--jdbc", metavar="URL", help="the live source, e.g. jdbc:mariadb://h:3306/")
    p.add_argument("--user", help="JDBC user")
    p.add_argument(
        "--password-env", metavar="VAR", help="environment variable holding the JDBC password"
    )
    p.add_argument("--as-of-hour", metavar="HOUR", help="compare the version of this hour")
    p.add_argument("--buckets", type=int, default=64, help="checksum buckets (default 64)")

    p = sub.add_parser("history", help="list the published versions of a table")
    _add_pipeline(p)
    p.add_argument("--table", required=True, metavar="DB.TABLE", help="a configured table")

    p = sub.add_parser("demo", help="make a sample dump of every format, run it, print a summary")
    p.add_argument("--hours", type=int, default=3, help="how many hours of changes (default 3)")
    p.add_argument(
        "--without-airflow",
        action="store_true",
        help="run the stages with `recon run` instead of the pipelines' Airflow DAGs",
    )
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
        from recon.decode.stage import decode_hour
        from recon.hours import parse_hour
        from recon.ops.run import print_counters
        from recon.spark.session import get_spark

        cfg = load_config(args.pipeline)
        hour = parse_hour(args.hour, "--hour")
        counters = decode_hour(
            get_spark(f"recon-decode-{cfg.name}"), cfg, hour, args.run_id, args.allow_incomplete
        )
        print_counters(counters)
        return 0
    if args.command == "run":
        from recon.ops.run import run_hours

        results = run_hours(args.pipeline, args.first, args.last, args.allow_incomplete)
        failed = [r["hour"] for r in results if r["audit"]["verdict"] == "fail"]
        if failed:
            print(
                f"recon run: audit verdict fail for hour(s) {', '.join(failed)}; see the reports "
                "(`recon report --pipeline ... --hour H`)",
                file=sys.stderr,
            )
            return 1
        return 0
    if args.command in ("audit", "report"):
        from recon.audit.report import audit_dir, audit_hour, load_report, summary_lines
        from recon.config import load_config
        from recon.hours import parse_hour

        cfg = load_config(args.pipeline)
        hour = parse_hour(args.hour, "--hour")
        if args.command == "audit":
            from recon.spark.session import get_spark

            report = audit_hour(
                get_spark(f"recon-audit-{cfg.name}"), cfg, hour, audited_by=args.run_id
            )
        else:
            report = load_report(cfg, hour)
        for line in summary_lines(report):
            print(line)
        print(f"  report: {audit_dir(cfg, hour) / 'report.html'}")
        return 1 if report["verdict"] == "fail" else 0
    if args.command == "merge":
        from recon.config import load_config
        from recon.hours import parse_hour
        from recon.merge.stage import merge_hour
        from recon.ops.run import print_merge
        from recon.spark.session import get_spark

        cfg = load_config(args.pipeline)
        hour = parse_hour(args.hour, "--hour")
        spark = get_spark(f"recon-merge-{cfg.name}")
        print_merge(
            merge_hour(
                spark, cfg, hour, args.run_id, buckets=cfg.buckets, tables=_tables(args.tables)
            )
        )
        return 0
    if args.command == "expire":
        from recon.config import load_config
        from recon.ops.expire import expire

        res = expire(load_config(args.pipeline), args.keep_hours)
        st = res["state"]
        print(
            f"kept hours from {res['cutoff']} on; merge state: {st['saved_states_dropped']} saved "
            f"hour states dropped, {st['folders_removed']} folders removed ({st['bytes']} bytes)"
        )
        for name, t in res["tables"].items():
            print(
                f"  {name}: {t['snapshots_expired']} versions expired, "
                f"{t['folders_removed']} folders removed ({t['bytes']} bytes)"
            )
        return 0
    if args.command == "rollback":
        from recon.ops.run import rollback

        rollback(args.pipeline, args.to_hour)
        return 0
    if args.command == "rebuild":
        from recon.ops.run import rebuild

        rebuild(args.pipeline, args.last, _tables(args.tables), args.run_id)
        return 0
    if args.command == "export":
        from recon.config import load_config
        from recon.hours import format_hour, parse_hour
        from recon.publish.iceberg import export_rows, write_export

        cfg = load_config(args.pipeline)
        as_of = (
            format_hour(parse_hour(args.as_of_hour, "--as-of-hour")) if args.as_of_hour else None
        )
        rows = export_rows(cfg, args.table, args.with_metadata, args.snapshot_id, as_of)
        n = write_export(rows, Path(args.out))
        print(f"{n} rows of {args.table} written to {args.out}")
        return 0
    if args.command == "reconcile":
        import json as _json
        import os

        from recon.audit.reconcile import attach_to_report, reconcile_table
        from recon.config import load_config
        from recon.spark.session import get_spark

        cfg = load_config(args.pipeline)
        password = None
        if args.password_env:
            if args.password_env not in os.environ:
                raise ReconError(f"--password-env {args.password_env}: that variable is not set")
            password = os.environ[args.password_env]
        if not 1 <= args.buckets <= 65536:
            raise ReconError("--buckets must be between 1 and 65536")
        res = reconcile_table(
            get_spark(f"recon-reconcile-{cfg.name}"),
            cfg,
            args.table,
            snapshot=Path(args.snapshot) if args.snapshot else None,
            jdbc=args.jdbc,
            user=args.user,
            password=password,
            as_of_hour=args.as_of_hour,
            buckets=args.buckets,
        )
        folder = attach_to_report(cfg, res)
        verdict = "MISMATCH" if res["mismatches"] else "MATCH"
        print(
            f"{args.table} (version of hour {res['published_hour']}) vs {res['source']['kind']}: "
            f"{verdict}: {res['rows_table']} rows published, {res['rows_source']} at the source; "
            f"{res['buckets_differing']}/{res['buckets']} buckets differ; missing "
            f"{res['missing']}, extra {res['extra']}, different {res['different']}, in flight "
            f"{res['in_flight']}"
        )
        for kind in ("missing", "extra", "different"):
            for smp in res["samples"][kind]:
                print(f"  {kind} {smp['key']}: table {smp['table']} source {smp['source']}")
        if folder is not None:
            out = folder / f"reconcile-{args.table}.json"
            out.write_text(_json.dumps(res, indent=2, default=str))
            print(f"  report: {folder / 'report.html'} (reconcile section), {out}")
        return 1 if res["mismatches"] else 0
    if args.command == "history":
        from recon.config import load_config
        from recon.publish.iceberg import history, load_table

        cfg = load_config(args.pipeline)
        for h in history(load_table(cfg, args.table)):
            print(
                f"{h['snapshot_id']:>20}  {h['committed_at']}  hour {h['hour']}  "
                f"run {h['run_id']}  schema v{h['schema_version']}  {h['records']} rows"
            )
        return 0
    if args.command == "demo":
        from recon.demo.demo import run_demo

        if args.hours < 2:
            raise ReconError("--hours must be at least 2, so that something straddles an hour")
        run_demo(args.hours, via_airflow=not args.without_airflow)
        return 0
    raise ReconError(f"unknown command {args.command}")


def _tables(text: str | None) -> list[str] | None:
    """`--tables a.b,c.d` -> a list; empty or missing -> None (every table)."""
    names = [t.strip() for t in (text or "").split(",") if t.strip()]
    return names or None


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
