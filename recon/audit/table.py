"""One row per pipeline-hour in the Iceberg table `<pipeline>__recon_audit.hours`, for trends
across hours (a re-run of an hour replaces its row)."""

from __future__ import annotations

import json
import warnings

import pyarrow as pa
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import EqualTo
from pyiceberg.table import Table

from recon.audit.report import AuditReport
from recon.config import PipelineConfig
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
    ]
)


def audit_row(report: AuditReport) -> dict[str, object]:
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
    }


def append_audit_table(cfg: PipelineConfig, report: AuditReport) -> None:
    """Write the hour's row (replacing an earlier one of the same hour)."""
    data = pa.Table.from_pylist([audit_row(report)], schema=SCHEMA)
    cat = get_catalog(cfg)
    ident = identifier(cat, cfg, AUDIT_TABLE)
    try:
        table = cat.load_table(ident)
    except NoSuchTableError:
        cat.create_namespace_if_not_exists(ident[:-1])
        table = cat.create_table(ident, schema=SCHEMA)
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
