"""`recon`: the command line (contract section 3). User errors print one line, never a traceback.

One `cmd_<name>` per subcommand; each imports what it needs when it runs, so `recon validate`
or `recon --help` never start Spark.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from recon import __version__
from recon.cli import inspect_cmd
from recon.config import PipelineConfig, load_config, load_folder
from recon.errors import EXIT_USER_ERROR, ReconError
from recon.hours import format_hour, parse_hour, parse_time
from recon.layout import write_json_atomic
from recon.objstore import StoreError

if TYPE_CHECKING:  # the commands import what they run when they run
    from datetime import datetime

    from recon.audit.report import AuditReport
    from recon.config import PipelineConfig

Command = Callable[[argparse.Namespace], int]


def _add_pipeline(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pipeline", required=True, metavar="FILE", help="pipeline YAML file")


def _add_hour(p: argparse.ArgumentParser, help: str = "YYYY-MM-DDTHH (UTC)") -> None:
    p.add_argument("--hour", required=True, metavar="HOUR", help=help)


def _add_run_id(
    p: argparse.ArgumentParser, help: str = "identifier recorded in the outputs"
) -> None:
    p.add_argument("--run-id", default=None, help=help)


def _add_tables(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tables", metavar="DB.T,...", help="only these tables (default: all)")


def _add_incomplete(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help=f"{what} not complete yet (no _SUCCESS; Kafka Connect: docs/reference/dump-layouts.md)",
    )


def _stage_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check pipeline configs (a file or a folder of them)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="pipeline YAML file or folder")
    p.add_argument(
        "--check-access",
        action="store_true",
        help="also list the s3:// dumps and snapshot, and write and delete a marker under an "
        "s3:// catalog warehouse (exit 2 when one cannot be reached)",
    )
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("decode", help="decode one pipeline-hour of raw dumps into canonical events")
    _add_pipeline(p)
    _add_hour(p)
    _add_run_id(p)
    _add_incomplete(p, "decode an hour")
    p.set_defaults(func=cmd_decode)

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
    _add_incomplete(p, "process hours")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "merge", help="merge one decoded pipeline-hour into the state and publish the tables"
    )
    _add_pipeline(p)
    _add_hour(p)
    _add_run_id(p)
    _add_tables(p)
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser("audit", help="(re)write the audit report of a merged hour")
    _add_pipeline(p)
    _add_hour(p, "YYYY-MM-DDTHH")
    _add_run_id(p, "the run rewriting the report (recorded)")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("report", help="print the audit summary of an hour (exit 1 on fail)")
    _add_pipeline(p)
    _add_hour(p, "YYYY-MM-DDTHH")
    p.set_defaults(func=cmd_report)


def _state_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rebuild",
        help="drop the merge state and merge every decoded hour again, from the snapshot on",
    )
    _add_pipeline(p)
    p.add_argument("--to", dest="last", metavar="HOUR", help="last hour (default: last decoded)")
    _add_tables(p)
    _add_run_id(p)
    p.set_defaults(func=cmd_rebuild)

    p = sub.add_parser(
        "rollback",
        help="roll the tables and the merge state back to the end of an hour (later hours undone)",
    )
    _add_pipeline(p)
    p.add_argument(
        "--to-hour", required=True, metavar="HOUR", help="YYYY-MM-DDTHH (UTC) or an ISO datetime"
    )
    p.set_defaults(func=cmd_rollback)

    p = sub.add_parser(
        "acknowledge-reset",
        help="accept an offset reset (a re-created topic): later hours stop failing on it",
    )
    _add_pipeline(p)
    p.add_argument("--topic", required=True, help="the topic whose offsets started again")
    p.add_argument("--partition", required=True, type=int, help="its partition")
    p.add_argument(
        "--hour", required=True, metavar="HOUR", help="the first hour of the new offsets (UTC)"
    )
    p.add_argument("--note", default="", help="why, kept with the acknowledgement")
    p.set_defaults(func=cmd_acknowledge_reset)

    p = sub.add_parser(
        "expire", help="keep the last N hours of versions and merge states, delete older files"
    )
    _add_pipeline(p)
    p.add_argument(
        "--keep-hours", type=int, default=168, help="hours of history to keep (default 168)"
    )
    p.set_defaults(func=cmd_expire)


def _export_command(sub: argparse._SubParsersAction) -> None:
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
    v.add_argument(
        "--as-of-time",
        metavar="TIME",
        help="the rows as the source held them at this commit time, YYYY-MM-DDTHH:MM:SS[.ffffff] "
        "UTC (from the table's history: `history: true`)",
    )
    p.set_defaults(func=cmd_export)


def _trace_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trace",
        help="every change that made one row, with its source record (a table with history)",
    )
    _add_pipeline(p)
    p.add_argument("--table", required=True, metavar="DB.TABLE", help="a configured table")
    p.add_argument(
        "--key",
        required=True,
        help="the row's key: its value (a one-column key), or col=value,col=value",
    )
    p.add_argument("--as-of-hour", metavar="HOUR", help="only the changes merged up to this hour")
    p.add_argument("--raw", action="store_true", help="with each record's key and value (base64)")
    p.set_defaults(func=cmd_trace)


def _table_commands(sub: argparse._SubParsersAction) -> None:
    _export_command(sub)
    _trace_command(sub)
    _reconcile_command(sub)

    p = sub.add_parser("history", help="list the published versions of a table")
    _add_pipeline(p)
    p.add_argument("--table", required=True, metavar="DB.TABLE", help="a configured table")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("demo", help="make a sample dump of every format, run it, print a summary")
    p.add_argument("--hours", type=int, default=3, help="how many hours of changes (default 3)")
    p.add_argument(
        "--without-airflow",
        action="store_true",
        help="run the stages with `recon run` instead of the pipelines' Airflow DAGs",
    )
    p.add_argument(
        "--write-only", action="store_true", help="only write the sample dumps and snapshot"
    )
    p.add_argument(
        "--airflow-from-environment",
        action="store_true",
        help="run the DAGs in the Airflow this environment configures (its database and "
        "spark_default, e.g. the compose services) instead of a demo home on SQLite",
    )
    p.add_argument(
        "--parallel",
        type=int,
        default=None,
        metavar="N",
        help="pipelines run at a time (default: one per core, at most 3; 1 runs them in turn)",
    )
    p.set_defaults(func=cmd_demo)


def _reconcile_command(sub: argparse._SubParsersAction) -> None:
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
    p.add_argument(
        "--repair",
        action="store_true",
        help="correct the differing keys from the live source (--jdbc) in one correction commit",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="with --repair: list what it would change, change nothing",
    )
    p.set_defaults(func=cmd_reconcile)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recon", description="Reconcile MySQL/MariaDB CDC streams dumped from Kafka."
    )
    parser.add_argument("--version", action="version", version=f"recon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _stage_commands(sub)
    _state_commands(sub)
    _table_commands(sub)
    inspect_cmd.add_commands(sub)
    return parser


def _log_to_stderr() -> None:
    """The library's notes (e.g. which hour an ISO datetime was taken as) as `recon: ...` lines."""
    logger = logging.getLogger("recon")
    if not any(getattr(h, "recon_cli", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("recon: %(message)s"))
        handler.recon_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    # the stages' own per-hour lines repeat what the CLI prints: shown with RECON_LOG_LEVEL
    level = os.environ.get("RECON_LOG_LEVEL", "").upper()
    for name in ("recon.decode", "recon.merge", "recon.audit"):
        logging.getLogger(name).setLevel(level if level in _LEVELS else logging.WARNING)


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def main(argv: Sequence[str] | None = None) -> int:
    level = os.environ.get("RECON_LOG_LEVEL", "").upper()
    if level and level not in _LEVELS:
        print(
            f"recon: RECON_LOG_LEVEL={level!r} is not a log level; use DEBUG, INFO, WARNING or "
            "ERROR",
            file=sys.stderr,
        )
        return 2
    _log_to_stderr()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ReconError as err:
        print(f"recon {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"recon {args.command}: interrupted", file=sys.stderr)
        return 130


def tables_arg(text: str | None) -> list[str] | None:
    """`--tables a.b,c.d` -> a list; empty or missing -> None (every table)."""
    names = [t.strip() for t in (text or "").split(",") if t.strip()]
    return names or None


# -- commands ------------------------------------------------------------------------------------
def cmd_validate(args: argparse.Namespace) -> int:
    """Exit 1 when a config is bad; 2 when `--check-access` cannot reach a store."""
    bad, unreachable = 0, 0
    for raw in args.paths:
        p = Path(raw)
        good, errors = load_folder(p) if p.is_dir() else _load_one(p)
        for cfg in good:
            try:
                if args.check_access:
                    check_stores(cfg)
                problem = dumps_problem(cfg)
            except StoreError as err:
                problem, unreachable = f"{cfg.source_file}: {err}", unreachable + 1
            if problem:
                errors[cfg.source_file or p] = problem
                continue
            print(f"ok  {cfg.source_file}  (dag recon_{cfg.name}, format {cfg.format})")
        for msg in errors.values():
            print(f"bad {msg}")
        bad += len(errors)
    return EXIT_USER_ERROR if unreachable else 1 if bad else 0


def check_stores(cfg: PipelineConfig) -> None:
    """`StoreError` (one line) unless the pipeline's s3:// places can be reached: the dumps and
    the snapshot listed, the catalog's warehouse written (a marker put and deleted)."""
    from recon.objstore import check_access, is_s3

    for uri in (cfg.raw_uri, cfg.snapshot_uri):
        if uri:
            check_access(uri, write=False)
    warehouse = cfg.catalog.get("warehouse", "")
    if is_s3(warehouse):
        check_access(warehouse, write=True)


def _load_one(p: Path) -> tuple[list[PipelineConfig], dict[Path, str]]:
    try:
        return [load_config(p)], {}
    except ReconError as err:
        return [], {p: str(err)}


def dumps_problem(cfg: PipelineConfig) -> str | None:
    """What in the pipeline's dumps its config cannot read (one line), if anything."""
    from recon.rawdumps import bin_file_of_binary_format

    found = bin_file_of_binary_format(cfg.raw_root, cfg.topics, cfg.format, cfg.dump)
    if found is None:
        return None
    return (
        f"{cfg.source_file}: `dump.layout`: {found} is a ByteArrayFormat (.bin) file, and "
        f"{cfg.format}'s values are binary (a separator cannot delimit them); dump the topic "
        "with the connector's AvroFormat and ByteArrayConverter"
    )


def cmd_decode(args: argparse.Namespace) -> int:
    from recon.cli.output import print_counters
    from recon.decode.stage import decode_hour
    from recon.ops.guard import guarded
    from recon.ops.sizing import run_jvm_options
    from recon.spark.session import get_spark

    cfg = load_config(args.pipeline)
    hour = parse_hour(args.hour, "--hour")
    spark = get_spark(f"recon-decode-{cfg.name}", jvm=run_jvm_options(cfg, [hour]))
    with guarded("decode", spark, cfg, hour):
        counters = decode_hour(spark, cfg, hour, args.run_id, args.allow_incomplete)
    print_counters(counters)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from recon.cli.output import Printer
    from recon.ops.run import run_hours

    results = run_hours(args.pipeline, args.first, args.last, args.allow_incomplete, Printer())
    failed = [r["hour"] for r in results if r["audit"]["verdict"] == "fail"]
    if failed:
        print(
            f"recon run: audit verdict fail for hour(s) {', '.join(failed)}; see the reports "
            "(`recon report --pipeline ... --hour H`)",
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from recon.cli.output import print_merge
    from recon.merge.stage import merge_hour
    from recon.ops.guard import guarded
    from recon.ops.lock import pipeline_lock
    from recon.ops.sizing import run_jvm_options
    from recon.spark.session import get_spark

    cfg = load_config(args.pipeline)
    hour = parse_hour(args.hour, "--hour")
    spark = get_spark(f"recon-merge-{cfg.name}", jvm=run_jvm_options(cfg, [hour]))
    tables = tables_arg(args.tables)
    with pipeline_lock(cfg, "recon merge"), guarded("merge", spark, cfg, hour):
        result = merge_hour(spark, cfg, hour, args.run_id, buckets=cfg.buckets, tables=tables)
    print_merge(result)
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from recon.audit.stage import audit_hour
    from recon.ops.lock import pipeline_lock
    from recon.ops.sizing import run_jvm_options
    from recon.spark.session import get_spark

    cfg = load_config(args.pipeline)
    hour = parse_hour(args.hour, "--hour")
    spark = get_spark(f"recon-audit-{cfg.name}", jvm=run_jvm_options(cfg, [hour]))
    with pipeline_lock(cfg, "recon audit"):
        report = audit_hour(spark, cfg, hour, audited_by=args.run_id)
    return _print_summary(cfg, hour, report)


def cmd_report(args: argparse.Namespace) -> int:
    from recon.audit.report import load_report

    cfg = load_config(args.pipeline)
    hour = parse_hour(args.hour, "--hour")
    return _print_summary(cfg, hour, load_report(cfg, hour))


def _print_summary(cfg: PipelineConfig, hour: datetime, report: AuditReport) -> int:
    from recon.audit.report import summary_lines

    for line in summary_lines(report):
        print(line)
    print(f"  report: {cfg.layout.audit(hour) / 'report.html'}")
    return 1 if report["verdict"] == "fail" else 0


def cmd_acknowledge_reset(args: argparse.Namespace) -> int:
    from recon.ops.acknowledge import acknowledge_reset

    cfg = load_config(args.pipeline)
    entry, new = acknowledge_reset(cfg, args.topic, args.partition, args.hour, args.note)
    what = "acknowledged" if new else "already acknowledged"
    print(
        f"offset reset of {entry['topic']}[{entry['partition']}] {what} from hour "
        f"{entry['hour']} on; run that hour's audit again (clear its audit task, or "
        f"`recon audit --pipeline {args.pipeline} --hour {entry['hour']}`)"
    )
    return 0


def cmd_expire(args: argparse.Namespace) -> int:
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
            + (f"; {t['note']}" if t.get("note") else "")
        )
    out = res["hour_outputs"]
    print(
        f"  hours before {res['cutoff']}'s previous hour: {out['removed']} decode, quarantine "
        f"and report entries removed ({out['bytes']} bytes), {out['offset_hours_folded']} "
        "hours of offset intervals folded"
    )
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from recon.cli.output import Printer
    from recon.ops.rollback import rollback

    rollback(args.pipeline, args.to_hour, Printer())
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    from recon.cli.output import Printer
    from recon.ops.rebuild import rebuild

    rebuild(args.pipeline, args.last, tables_arg(args.tables), args.run_id, Printer())
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from recon.publish.export import export_as_of_time, export_rows, write_export

    cfg = load_config(args.pipeline)
    if args.as_of_time:
        at = parse_time(args.as_of_time, "--as-of-time")
        rows = export_as_of_time(cfg, args.table, at, args.with_metadata)
    else:
        hour = args.as_of_hour and format_hour(parse_hour(args.as_of_hour, "--as-of-hour"))
        rows = export_rows(cfg, args.table, args.with_metadata, args.snapshot_id, hour)
    n = write_export(rows, Path(args.out))
    print(f"{n} rows of {args.table} written to {args.out}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    import json

    from recon.ops.trace import trace

    changes = trace(args.pipeline, args.table, args.key, args.as_of_hour, args.raw)
    for c in changes:
        print(json.dumps(c, ensure_ascii=False, default=str))
    if not changes:
        print(f"no change of {args.table} key {args.key} is in its history", file=sys.stderr)
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    from recon.audit.reconcile import attach_to_report, reconcile_table
    from recon.ops.lock import pipeline_lock
    from recon.spark.session import get_spark

    cfg = load_config(args.pipeline)
    password = None
    if args.password_env:
        if args.password_env not in os.environ:
            raise ReconError(f"--password-env {args.password_env}: that variable is not set")
        password = os.environ[args.password_env]
    if not 1 <= args.buckets <= 65536:
        raise ReconError("--buckets must be between 1 and 65536")
    if args.repair or args.dry_run:
        return _repair(args, cfg, password)
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
    with pipeline_lock(cfg, "recon reconcile"):  # the hour's report, as its audit writes it
        folder = attach_to_report(cfg, res)
        if folder is not None:
            write_json_atomic(folder / f"reconcile-{args.table}.json", res)
    _print_reconcile(args.table, res)
    if folder is not None:
        out = folder / f"reconcile-{args.table}.json"
        print(f"  report: {folder / 'report.html'} (reconcile section), {out}")
    return 1 if res["mismatches"] else 0


def _repair(args: argparse.Namespace, cfg: PipelineConfig, password: str | None) -> int:
    from recon.ops.repair import repair_table
    from recon.spark.session import get_spark

    if not args.repair:
        raise ReconError("--dry-run lists what --repair would change: give both")
    if not args.jdbc or args.as_of_hour:
        raise ReconError(
            "--repair corrects the current version from the live source: give --jdbc URL, "
            "without --snapshot or --as-of-hour"
        )
    spark = get_spark(f"recon-repair-{cfg.name}")
    out = repair_table(
        spark, cfg, args.table, (args.jdbc, args.user, password), args.buckets, args.dry_run
    )
    _print_reconcile(args.table, out["before"])
    n, verb = out["repaired"], "would repair" if args.dry_run else "repaired"
    if not n:
        print(f"{args.table}: nothing to repair")
        return 0
    print(f"{args.table}: {verb} {n} keys in the version of hour {out['hour']}:")
    for k in out["keys"][:LISTED_ON_SCREEN]:
        print(f"  {k['kind']} {k['key']}: {k['before']} -> {k['after']}")
    if n > LISTED_ON_SCREEN:
        print(f"  ... and {n - LISTED_ON_SCREEN} more")
    if args.dry_run:
        return 0
    after = out["after"]
    print(f"  after the repair: {after['mismatches']} mismatches (snapshot "
          f"{out['repair']['snapshot_after']}, correction); report: "
          f"{cfg.layout.report(parse_hour(out['hour'], 'hour'))}")  # fmt: skip
    return 1 if after["mismatches"] else 0


LISTED_ON_SCREEN = 20
"""Keys a repair (or its dry run) prints; the hour's report lists more."""


def _print_reconcile(table: str, res: dict[str, object]) -> None:
    ahead: dict[str, object] | None = res.get("source_ahead")  # type: ignore[assignment]
    verdict = "MISMATCH" if res["mismatches"] else ("PENDING" if ahead else "MATCH")
    print(
        f"{table} (version of hour {res['published_hour']}) vs "
        f"{res['source']['kind']}: "  # type: ignore[index]
        f"{verdict}: {res['rows_table']} rows published, {res['rows_source']} at the source; "
        f"{res['buckets_differing']}/{res['buckets']} buckets differ; missing "
        f"{res['missing']}, extra {res['extra']}, different {res['different']}, in flight "
        f"{res['in_flight']}"
    )
    if ahead:
        print(
            f"  the source was read at {ahead['source']}, past the stream decoded so far "
            f"({ahead['decoded']}): {res['pending']} differing rows are not judged; compare "
            "again once the hours through that position are decoded"
        )
    samples: dict[str, list[dict[str, object]]] = res["samples"]  # type: ignore[assignment]
    for kind in ("missing", "extra", "different"):
        for smp in samples[kind]:
            print(f"  {kind} {smp['key']}: table {smp['table']} source {smp['source']}")


def cmd_history(args: argparse.Namespace) -> int:
    from recon.publish.iceberg import history, load_table

    cfg = load_config(args.pipeline)
    for h in history(load_table(cfg, args.table)):
        print(
            f"{h['snapshot_id']:>20}  {h['committed_at']}  hour {h['hour']}  "
            f"run {h['run_id']}  schema v{h['schema_version']}  {h['records']} rows"
        )
    return 0


DEMO_MAX_HOURS = 24
"""The demo pipelines' DAGs schedule one day (`airflow.end_date` in pipelines/demo_*.yaml)."""


def cmd_demo(args: argparse.Namespace) -> int:
    from recon.demo.demo import default_parallel, run_demo

    if not 2 <= args.hours <= DEMO_MAX_HOURS:
        raise ReconError(
            f"--hours must be from 2 (so that something straddles an hour) to "
            f"{DEMO_MAX_HOURS} (the demo pipelines' day: their DAGs end with it)"
        )
    if args.parallel is not None and args.parallel < 1:
        raise ReconError(f"--parallel {args.parallel}: give 1 or more pipelines at a time")
    run_demo(
        args.hours,
        via_airflow=not args.without_airflow,
        write_only=args.write_only,
        own_airflow=not args.airflow_from_environment,
        parallel=args.parallel or default_parallel(),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
