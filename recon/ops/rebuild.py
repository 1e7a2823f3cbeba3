"""`recon rebuild`: drop the merge state of some or all tables and merge every decoded hour
again from the snapshot on, re-auditing each."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypedDict

from recon.audit.report import AuditReport
from recon.audit.stage import audit_hour
from recon.config import PipelineConfig, load_config
from recon.errors import ReconError
from recon.hours import format_hour, hour_range, parse_hour
from recon.layout import read_json
from recon.merge.manifest import check_tables, reset_state
from recon.merge.result import MergeResult
from recon.merge.stage import merge_hour
from recon.ops.lock import pipeline_lock
from recon.ops.run import QUIET, Progress
from recon.spark.session import get_spark


class RebuiltHour(TypedDict):
    hour: str
    merge: MergeResult
    audit: AuditReport


def decoded_hours(cfg: PipelineConfig, last: datetime) -> list[datetime]:
    """The decoded hours from the pipeline's start through `last`, in order."""
    if last < cfg.start:
        return []
    return [h for h in hour_range(cfg.start, last) if cfg.layout.decode_counters(h).is_file()]


def _check_history_kept(cfg: PipelineConfig) -> None:
    """A rebuild merges every hour since the start: refused once `recon expire` deleted what
    early hours decoded (it would publish the snapshot plus the window's changes only)."""
    marker = cfg.layout.expired_marker
    before = read_json(marker)["hours_before"] if marker.is_file() else ""
    if before > format_hour(cfg.start):
        raise ReconError(
            f"pipeline {cfg.name} no longer has what hours before {before} decoded (expired: "
            "retention_hours / recon expire), and a rebuild merges every hour since the start; "
            "go back to an hour in the window instead: `recon rollback --pipeline "
            f"{cfg.source_file} --to-hour HOUR`, then `recon run` the hours after it"
        )


def rebuild(
    pipeline: str,
    through: str | None,
    tables: list[str] | None = None,
    run_id: str | None = None,
    progress: Progress = QUIET,
    lock_wait: float = 0,
) -> list[RebuiltHour]:
    """Drop the merge state of the tables (all, or `tables`) and merge again, from the snapshot,
    every decoded hour since the pipeline's start through `through` (default: the last decoded
    hour), re-auditing each. Decoding is not repeated. Only the last hour publishes: readers
    see the tables as they were until it replaces each as a whole (publishing every hour made
    them go back to the snapshot and forward again); the earlier versions stay in the Iceberg
    history, and so do the states saved for the hours before (rollback to one restores the
    state and version from before the rebuild). A rebuild killed part-way publishes nothing;
    the next merge of the tables publishes them whole."""
    cfg = load_config(pipeline)
    with pipeline_lock(cfg, "recon rebuild", lock_wait):
        return _rebuild(cfg, through, tables, run_id, progress)


def _rebuild(
    cfg: PipelineConfig,
    through: str | None,
    tables: list[str] | None,
    run_id: str | None,
    progress: Progress,
) -> list[RebuiltHour]:
    names = check_tables(cfg, tables)
    _check_history_kept(cfg)
    last = parse_hour(through, "--to") if through else datetime.now(UTC)
    hours = decoded_hours(cfg, last)
    reset_state(cfg, names)
    span = f" ({format_hour(hours[0])} .. {format_hour(hours[-1])})" if hours else ""
    progress.note(
        f"{cfg.name}: merge state of {', '.join(names)} dropped; merging "
        f"{len(hours)} decoded hour(s) again{span}"
    )
    if not hours:
        return []
    spark = get_spark(f"recon-rebuild-{cfg.name}")
    out: list[RebuiltHour] = []
    for h in hours:
        rid = f"{run_id}_{format_hour(h)}" if run_id else None
        merged = merge_hour(
            spark, cfg, h, run_id=rid, buckets=cfg.buckets, tables=tables, publish=h == hours[-1]
        )
        progress.merged(merged)
        report = audit_hour(spark, cfg, h)
        progress.audited(report, cfg, h)
        out.append({"hour": format_hour(h), "merge": merged, "audit": report})
    return out
