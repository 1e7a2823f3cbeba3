"""`recon run` and the stages of the DAG's spark-submit job: every stage for each hour, in order,
on one Spark session. Every hour's report is written before its verdict counts."""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from datetime import datetime
from typing import Any, TypedDict

from pyspark.sql import SparkSession

from recon.audit.report import AuditReport
from recon.audit.stage import audit_hour
from recon.config import PipelineConfig, load_config
from recon.decode.stage import decode_hour
from recon.decode.stats import DecodeCounters
from recon.errors import ConfigError
from recon.hours import format_hour, hour_range, parse_hour
from recon.merge.result import MergeResult
from recon.merge.stage import merge_hour
from recon.ops.guard import guarded
from recon.ops.lock import pipeline_lock
from recon.ops.sizing import run_jvm_options
from recon.spark.session import get_spark


class HourResult(TypedDict):
    hour: str
    decode: DecodeCounters
    merge: MergeResult
    audit: AuditReport


class Progress:
    """What an operation tells its caller as it goes (the CLI prints; tests stay quiet)."""

    def decoded(self, counters: DecodeCounters) -> None: ...

    def merged(self, result: MergeResult) -> None: ...

    def audited(self, report: AuditReport, cfg: PipelineConfig, hour: datetime) -> None: ...

    def note(self, text: str) -> None: ...


QUIET = Progress()
log = logging.getLogger(__name__)


def hour_progress(stage: str, i: int, n: int, hour: datetime, so_far: int, t0: float) -> None:
    """`merge: hour 2 of 24 (2026-11-20T01) done, 1234 records so far, 41.2 s`."""
    log.info(
        "%s: hour %d of %d (%s) done, %d records so far, %.1f s",
        stage, i, n, format_hour(hour), so_far, time.monotonic() - t0,
    )  # fmt: skip


def hours_of(cfg: PipelineConfig, first: str, last: str | None) -> list[datetime]:
    """The hours `--from first --to last` names, checked against the pipeline's start."""
    h0 = parse_hour(first, "--from")
    h1 = parse_hour(last, "--to") if last else h0
    hours = hour_range(h0, h1)
    if h0 < cfg.start:
        raise ConfigError(
            f"--from {first} is before the pipeline's start "
            f"{format_hour(cfg.start)}; start at or after it"
        )
    return hours


def run_hours(
    pipeline: str,
    first: str,
    last: str | None,
    allow_incomplete: bool = False,
    progress: Progress = QUIET,
) -> list[HourResult]:
    """Decode, merge + publish and audit each hour in order."""
    cfg = load_config(pipeline)
    hours = hours_of(cfg, first, last)
    spark = get_spark(f"recon-run-{cfg.name}", jvm=run_jvm_options(cfg, hours))
    out: list[HourResult] = []
    t0, so_far = time.monotonic(), 0
    for i, h in enumerate(hours, 1):
        out.append(run_hour(spark, cfg, h, allow_incomplete, progress))
        so_far += int(out[-1]["decode"]["totals"].get("records", 0))
        if len(hours) > 1:
            hour_progress("run", i, len(hours), h, so_far, t0)
    return out


def run_hour(
    spark: SparkSession,
    cfg: PipelineConfig,
    hour: datetime,
    allow_incomplete: bool = False,
    progress: Progress = QUIET,
    lock_wait: float = 0,
) -> HourResult:
    with guarded("decode", spark, cfg, hour):
        counters = decode_hour(spark, cfg, hour, allow_incomplete=allow_incomplete)
    progress.decoded(counters)
    with pipeline_lock(cfg, f"recon run (hour {format_hour(hour)})", lock_wait):
        with guarded("merge", spark, cfg, hour):
            merged = merge_hour(spark, cfg, hour, run_id=counters["run_id"], buckets=cfg.buckets)
        progress.merged(merged)
        with guarded("audit", spark, cfg, hour):
            report = audit_hour(spark, cfg, hour, run_id=counters["run_id"])
    progress.audited(report, cfg, hour)
    return {"hour": format_hour(hour), "decode": counters, "merge": merged, "audit": report}


def run_stage(
    stage: str,
    spark: SparkSession,
    cfg: PipelineConfig,
    hours: list[datetime],
    run_id: str | None = None,
    tables: list[str] | None = None,
    allow_incomplete: bool = False,
    progress: Progress = QUIET,
    lock_wait: float = 0,
    summary: dict[str, Any] | None = None,
) -> list[str]:
    """One stage over the hours, in order (what a DAG task runs); each hour gets its own run
    id (`<run_id>_<hour>`). Returns the hours whose audit verdict is `fail` (audit only); any
    other stage stops at the first error, so later hours never run past a failed one.
    `summary` (when given) gets the stage's totals: hours, records (read by decode, applied by
    merge), verdicts (audit), seconds."""
    writes_state = stage in ("merge", "audit")  # decode writes only its own hour's outputs
    with pipeline_lock(cfg, f"{stage} stage", lock_wait) if writes_state else nullcontext():
        return _stage_hours(
            stage, spark, cfg, hours, (run_id, tables, allow_incomplete), progress, summary
        )


def _stage_hours(
    stage: str,
    spark: SparkSession,
    cfg: PipelineConfig,
    hours: list[datetime],
    how: tuple[str | None, list[str] | None, bool],
    progress: Progress,
    summary: dict[str, Any] | None,
) -> list[str]:
    run_id, tables, allow_incomplete = how
    failed: list[str] = []
    totals = summary if summary is not None else {}
    totals.update(stage=stage, pipeline=cfg.name, hours=[], records=0, verdicts={})
    t0 = time.monotonic()
    for i, h in enumerate(hours, 1):
        rid = f"{run_id}_{format_hour(h)}" if run_id else None
        with guarded(stage, spark, cfg, h):
            if stage == "decode":
                counters = decode_hour(spark, cfg, h, rid, allow_incomplete)
                progress.decoded(counters)
                totals["records"] += int(counters["totals"].get("records", 0))
            elif stage == "merge":
                merged = merge_hour(spark, cfg, h, rid, buckets=cfg.buckets, tables=tables)
                progress.merged(merged)
                totals["records"] += sum(int(t["applied"]) for t in merged["tables"].values())
            else:
                report = audit_hour(spark, cfg, h, audited_by=rid)
                progress.audited(report, cfg, h)
                totals["verdicts"][format_hour(h)] = report["verdict"]
                if report["verdict"] == "fail":
                    failed.append(format_hour(h))
        totals["hours"].append(format_hour(h))
        hour_progress(stage, i, len(hours), h, totals["records"], t0)
    totals["seconds"] = round(time.monotonic() - t0, 1)
    return failed
