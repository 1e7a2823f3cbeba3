"""One row per pipeline-hour in the Iceberg table `<pipeline>__recon_audit.hours`, for trends
across hours (a re-run of an hour replaces its row): the UI's charts and hour list, and each
report's comparison with the day before, read it instead of the hours' report files."""

from __future__ import annotations

import json
import warnings
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import EqualTo
from pyiceberg.table import Table

from recon.audit.report import AuditReport
from recon.config import PipelineConfig
from recon.layout import hour_text, read_json
from recon.publish.iceberg import get_catalog, identifier

AUDIT_TABLE = "recon_audit.hours"  # per pipeline: `<pipeline>__recon_audit.hours`

SCHEMA = pa.schema(
    [
        ("hour", pa.string()),
        ("run_id", pa.string()),
        ("verdict", pa.string()),
        ("findings", pa.string()),
        ("records", pa.int64()),
        ("bytes", pa.int64()),
        ("quarantined", pa.int64()),
        ("offsets_missing", pa.int64()),
        ("events", pa.int64()),
        ("applied", pa.int64()),
        ("rows_after", pa.int64()),
        ("lag_seconds", pa.float64()),
        ("balanced", pa.bool_()),
        ("generated_at", pa.string()),
        ("seconds", pa.float64()),  # the hour's decode and merge (added later: null before)
        ("audited_by", pa.string()),  # the run that wrote the report (added later: null before)
    ]
)


def stage_seconds(cfg: PipelineConfig, hour: datetime) -> float | None:
    """The seconds the hour's decode and merge took in their last successful run."""
    path = cfg.layout.timings(hour)
    if not path.is_file():
        return None
    took = read_json(path)
    parts = [float(took[s]) for s in ("decode", "merge") if s in took]
    return round(sum(parts), 3) if parts else None


def audit_row(report: AuditReport, seconds: float | None = None) -> dict[str, object]:
    tables = report["tables"].values()
    return {
        "hour": report["hour"],
        "run_id": report["run_id"],
        "verdict": report["verdict"],
        "findings": json.dumps([f["kind"] for f in report["findings"]]),
        "records": report["input"]["records"],
        "bytes": report["input"]["bytes"],
        "quarantined": report["decoding"]["quarantined"],
        "offsets_missing": sum(p["offsets_missing"] for p in report["input"]["partitions"]),
        "events": sum(report["decoding"]["events_by_op"].values()),
        "applied": sum(int(t["applied"]) for t in tables),
        "rows_after": sum(int(t["rows_after"] or 0) for t in tables),
        "lag_seconds": report["freshness"]["lag_seconds"],
        "balanced": bool(report["identity"]["balanced"]),
        "generated_at": report["generated_at"],
        "seconds": seconds,
        "audited_by": report.get("audited_by"),
    }


def append_audit_table(cfg: PipelineConfig, report: AuditReport, hour: datetime) -> None:
    """Write the hour's row (replacing an earlier one of the same hour)."""
    data = pa.Table.from_pylist([audit_row(report, stage_seconds(cfg, hour))], schema=SCHEMA)
    cat = get_catalog(cfg)
    ident = identifier(cat, cfg, AUDIT_TABLE)
    try:
        table = cat.load_table(ident)
    except NoSuchTableError:
        cat.create_namespace_if_not_exists(ident[:-1])
        table = cat.create_table(ident, schema=SCHEMA)
    if len(table.schema().fields) < len(SCHEMA):  # a table of an earlier version: its new columns
        with table.update_schema() as update:
            update.union_by_name(SCHEMA)
    this_hour = EqualTo("hour", report["hour"])  # type: ignore[call-arg,arg-type]
    with warnings.catch_warnings():  # the first run of an hour has no row to replace
        warnings.filterwarnings("ignore", "Delete operation did not match any records")
        table.overwrite(data, overwrite_filter=this_hour)


def load_audit_table(cfg: PipelineConfig) -> Table | None:
    """The pipeline's audit table, or None before its first audit."""
    cat = get_catalog(cfg)
    try:
        return cat.load_table(identifier(cat, cfg, AUDIT_TABLE))
    except NoSuchTableError:
        return None


def audit_rows(
    cfg: PipelineConfig, since: datetime | None = None, until: datetime | None = None
) -> list[dict[str, Any]]:
    """The pipeline's rows, oldest hour first: those of hours in [since, until) when given;
    none before its first audit."""
    table = load_audit_table(cfg)
    if table is None:
        return []
    bounds = []  # hours are `YYYY-MM-DDTHH`: text order is time order
    if since is not None:
        bounds.append(f"hour >= '{hour_text(since)}'")
    if until is not None:
        bounds.append(f"hour < '{hour_text(until)}'")
    scan = table.scan(row_filter=" and ".join(bounds)) if bounds else table.scan()
    rows = scan.to_arrow().to_pylist()
    return sorted(rows, key=lambda r: str(r["hour"]))


def day_before(cfg: PipelineConfig, hour: datetime) -> list[dict[str, Any]]:
    """The rows of the 24 hours before `hour`."""
    return audit_rows(cfg, hour - timedelta(hours=24), hour)


COMPARED = (
    ("records", "records read"),
    ("quarantined", "quarantined"),
    ("events", "events decoded"),
    ("applied", "changes applied"),
    ("rows_after", "rows after"),
    ("lag_seconds", "lag of the newest change (s)"),
    ("seconds", "decode + merge (s)"),
)


def day_comparison(
    cfg: PipelineConfig, hour: datetime, report: AuditReport
) -> list[dict[str, Any]]:
    """The hour beside the day before it (the audit table's rows of the 24 hours before): per
    measure this hour's value, the same hour a day earlier, and the median, low and high of the
    24 hours; empty before there is a day before."""
    previous = day_before(cfg, hour)
    if not previous:
        return []
    now = audit_row(report, stage_seconds(cfg, hour))
    same = next((r for r in previous if r["hour"] == hour_text(hour - timedelta(hours=24))), None)
    out = []
    for key, label in COMPARED:
        seen = sorted(float(r[key]) for r in previous if r.get(key) is not None)
        value = now.get(key)
        out.append(
            {
                "label": label,
                "now": value,
                "day_before": same.get(key) if same else None,
                "median": seen[len(seen) // 2] if seen else None,
                "low": seen[0] if seen else None,
                "high": seen[-1] if seen else None,
                "outside": bool(seen)
                and value is not None
                and not seen[0] <= float(value) <= seen[-1],  # type: ignore[arg-type]
                "hours": len(seen),
            }
        )
    return out
