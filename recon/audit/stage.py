"""The `audit` stage of one pipeline-hour: read the facts, apply the rules, write the report
(`report.json` validated against its schema, `report.html`) and the audit table's row."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from datetime import datetime
from typing import Any

from pyspark.sql import SparkSession

from recon.audit.facts import read_facts
from recon.audit.reconcile import add_reconcile
from recon.audit.report import AuditReport, build_report, validate, write_report
from recon.audit.table import append_audit_table, day_comparison
from recon.config import PipelineConfig
from recon.layout import read_json
from recon.spark.session import SMALL_HOUR_ROWS, sized_for

log = logging.getLogger(__name__)


def audit_hour(
    spark: SparkSession | None,
    cfg: PipelineConfig,
    hour: datetime,
    run_id: str | None = None,
    audited_by: str | None = None,
) -> AuditReport:
    """Build, validate and write the hour's report; `audited_by`: the run that (re)wrote it,
    when it is not the run that merged the hour (an audit_only DAG run)."""
    small = _hour_records(cfg, hour) < SMALL_HOUR_ROWS
    with sized_for(spark, small) if spark is not None else nullcontext():
        facts = read_facts(spark, cfg, hour)
    report = build_report(facts, cfg, hour, run_id)
    report["audited_by"] = audited_by or report["run_id"]
    for result in _kept(cfg, hour, "reconcile"):  # a comparison made stays with its hour
        add_reconcile(report, result)
    repairs = _kept(cfg, hour, "repair")  # so do the repairs made to its version
    if repairs:
        report["repairs"] = {r["table"]: r["repairs"] for r in repairs}
    validate(report)
    write_report(cfg, hour, report, day_comparison(cfg, hour, report))
    append_audit_table(cfg, report, hour)
    (cfg.layout.audit(hour) / "failed.json").unlink(missing_ok=True)  # the hour ran to the end
    log.info("%s %s: audit verdict %s", cfg.name, report["hour"], report["verdict"])
    return report


def _kept(cfg: PipelineConfig, hour: datetime, what: str) -> list[dict[str, Any]]:
    """What `recon reconcile` left with the hour's report (`what`: `reconcile` its comparisons,
    `repair` its repairs; `<what>-<table>.json`)."""
    folder = cfg.layout.audit(hour)
    found = sorted(folder.glob(f"{what}-*.json")) if folder.is_dir() else []
    return [read_json(f) for f in found if f.stem.removeprefix(f"{what}-") in cfg.tables]


def _hour_records(cfg: PipelineConfig, hour: datetime) -> int:
    counters = cfg.layout.decode_counters(hour)
    if not counters.is_file():
        return 0
    return int(read_json(counters).get("totals", {}).get("records", 0))
