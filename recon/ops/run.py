"""`recon run`: every stage for each hour, in order, on one local Spark session.

Stages: decode, merge + publish, audit. Every hour's report is written before the verdict counts;
the command fails (exit 1) if any hour's verdict is `fail`.
"""

from __future__ import annotations

from typing import Any

from recon.config import load_config
from recon.hours import format_hour, hour_range, parse_hour


def run_hours(
    pipeline: str, first: str, last: str | None, allow_incomplete: bool = False, quiet: bool = False
) -> list[dict[str, Any]]:
    from recon.audit.report import audit_dir, audit_hour
    from recon.decode.stage import decode_hour
    from recon.merge.stage import merge_hour
    from recon.spark.session import get_spark

    cfg = load_config(pipeline)
    h0 = parse_hour(first, "--from")
    h1 = parse_hour(last, "--to") if last else h0
    hours = hour_range(h0, h1)
    if h0 < cfg.start:
        from recon.errors import ConfigError

        raise ConfigError(
            f"--from {first} is before the pipeline's start "
            f"{format_hour(cfg.start)}; start at or after it"
        )
    spark = get_spark(f"recon-run-{cfg.name}")
    results = []
    for h in hours:
        counters = decode_hour(spark, cfg, h, allow_incomplete=allow_incomplete)
        if not quiet:
            print_counters(counters)
        merged = merge_hour(spark, cfg, h, run_id=counters["run_id"], buckets=cfg.buckets)
        if not quiet:
            print_merge(merged)
        counters["merge"] = merged
        report = audit_hour(spark, cfg, h, run_id=counters["run_id"])
        if not quiet:
            print_report(report, audit_dir(cfg, h))
        counters["audit"] = report
        results.append(counters)
    return results


def rebuild(
    pipeline: str,
    through: str | None,
    tables: list[str] | None = None,
    run_id: str | None = None,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    """Drop the merge state of the tables (all, or `tables`) and merge again, from the snapshot,
    every decoded hour since the pipeline's start through `through` (default: the last decoded
    hour), re-auditing each. Decoding is not repeated. The published tables are replaced as a
    whole by the first hour merged; their earlier versions stay in the Iceberg history."""
    from datetime import UTC, datetime

    from recon.audit.report import audit_dir, audit_hour
    from recon.merge.stage import check_tables, decoded_hours, merge_hour, reset_state
    from recon.spark.session import get_spark

    cfg = load_config(pipeline)
    names = check_tables(cfg, tables)
    last = parse_hour(through, "--to") if through else datetime.now(UTC)
    hours = decoded_hours(cfg, last)
    reset_state(cfg, names)
    if not quiet:
        print(
            f"{cfg.name}: merge state of {', '.join(names)} dropped; merging "
            f"{len(hours)} decoded hour(s) again"
            + (f" ({format_hour(hours[0])} .. {format_hour(hours[-1])})" if hours else "")
        )
    if not hours:
        return []
    spark = get_spark(f"recon-rebuild-{cfg.name}")
    out = []
    for h in hours:
        rid = f"{run_id}_{format_hour(h)}" if run_id else None
        merged = merge_hour(spark, cfg, h, run_id=rid, buckets=cfg.buckets, tables=tables)
        if not quiet:
            print_merge(merged)
        report = audit_hour(spark, cfg, h)
        if not quiet:
            print_report(report, audit_dir(cfg, h))
        out.append({"hour": format_hour(h), "merge": merged, "audit": report})
    return out


def rollback(pipeline: str, to_hour: str, quiet: bool = False) -> dict[str, Any]:
    """Roll the pipeline back to the end of `to_hour`: its merge state as that hour left it, and
    every published table's version of that hour, restored as a new commit (the undone versions
    stay in the history). Later hours are no longer in the tables; merge them again (`recon run
    --from` the next hour, or clear their DAG runs) to bring them back. Decoding is kept."""
    from recon.merge.stage import load_manifest, rollback_state
    from recon.publish.iceberg import restore_version

    cfg = load_config(pipeline)
    H = format_hour(parse_hour(to_hour, "--to-hour"))
    later = [h for h in load_manifest(cfg).get("hours", []) if h > H]
    rollback_state(cfg, parse_hour(H))
    restored = [restore_version(cfg, t, H) for t in cfg.tables if _is_published(cfg, t)]
    if not quiet:
        for r in restored:
            what = "restored" if r["committed"] else "already current"
            print(
                f"{cfg.name}: {r['table']}: version of {H} (snapshot {r['restored_from']}) {what}"
            )
        if later:
            print(
                f"{cfg.name}: hours {later[0]} .. {later[-1]} are no longer in the tables; merge "
                f"them again with `recon run --pipeline {pipeline} --from {later[0]}` (or clear "
                "their DAG runs)"
            )
    return {"hour": H, "tables": restored, "hours_undone": later}


def _is_published(cfg: Any, table: str) -> bool:
    from recon.errors import ReconError
    from recon.publish.iceberg import load_table

    try:
        load_table(cfg, table)
    except ReconError:
        return False
    return True


def print_report(report: dict[str, Any], folder: Any) -> None:
    """The verdict line and the findings of one hour's audit."""
    from recon.audit.report import summary_lines

    lines = summary_lines(report)
    print(lines[0] + f"; report {folder}/report.html")
    for line in lines[1:]:
        if line.lstrip().startswith("["):
            print(line)


def print_counters(c: dict[str, Any]) -> None:
    """One line per decoded hour."""
    t = c["totals"]
    print(
        f"{c['pipeline']} {c['hour']}: {t.get('records', 0)} records read, "
        f"{t.get('duplicates_in_hour', 0) + t.get('duplicates_cross_hour', 0)} duplicates, "
        f"{sum(c['events_by_op'].values())} events {c['events_by_op']}, "
        f"{t.get('records_quarantined', 0) + t.get('unreadable_lines', 0)} quarantined, "
        f"{t.get('records_carried_out', 0)} carried to the next hour"
    )


def print_merge(m: dict[str, Any]) -> None:
    """One line per published table."""
    for name, t in m["tables"].items():
        sk = {k: v for k, v in t["skipped"].items() if v}
        pub = t["published"]
        print(
            f"{m['pipeline']} {m['hour']}: {name}: {t['rows_before']} -> {t['rows_after']} rows, "
            f"applied {t['applied']} {t['entered_by_op'] or '{}'}, skipped {sk or '{}'}, "
            f"schema v{t['schema_version']}, "
            + (f"snapshot {pub['snapshot_id']}" if pub["committed"] else "no change to publish")
        )
        if pub.get("uncastable"):
            print(
                f"{m['pipeline']} {m['hour']}: {name}: WARNING values that do not fit their "
                f"column type were published as NULL: {pub['uncastable']}; declare the column's "
                "real type with `ddl:` in the pipeline's table entry"
            )
