"""A minimal audit report that passes the report's JSON Schema, written as the audit writes
one (report.json and, with `cfg`, the hour's row of the audit table): for the UI's and the audit
table's tests, which need hours without running a pipeline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from recon.audit.report import REPORT_SCHEMA, SCHEMA_FILE
from recon.audit.table import append_audit_table
from recon.hours import parse_hour


def write_report(
    root: Path, hour: str, verdict: str, run_id: str, audited_by: str = "", cfg: Any = None
) -> None:
    """A minimal report that passes the report's JSON Schema (no input, no tables); with
    `cfg`, also the hour's row of its audit table, as the audit writes both."""
    d = root / hour
    rep = {
        "schema": REPORT_SCHEMA,
        "pipeline": "t",
        "hour": hour,
        "hour_start": hour + ":00:00+00:00",
        "hour_end": hour + ":59:59+00:00",
        "run_id": run_id,
        "audited_by": audited_by or run_id,
        "generated_at": "2026-01-01T00:00:00+00:00",
        "format": "debezium_json",
        "verdict": verdict,
        "fail_on": ["balance"],
        "findings": [],
        "input": {"partitions": [], "records": 0, "bytes": 0},
        "decoding": {
            k: 0
            for k in (
                "segments_reassembled",
                "segments_orphaned",
                "records_carried_in",
                "records_carried_out",
                "transactions_committed",
                "transactions_carried",
                "heartbeats",
                "checkpoints",
                "seq_gaps",
                "quarantined",
            )
        }
        | {
            "events_by_op": {},
            "gtid": {},
            "ddl": [],
            "quarantine_reasons": {},
            "quarantine_samples": {},
        },
        "tables": {},
        "freshness": {
            "newest_source_time": None,
            "lag_seconds": None,
            "heartbeats": 0,
            "checkpoints": 0,
        },
        "identity": {
            "records": dict.fromkeys(
                ("read", "distinct", "duplicates_in_hour", "duplicates_of_earlier_hours"), 0
            )
            | {"balanced": True},
            "dispositions": dict.fromkeys(
                ("distinct", "carried_in", "consumed", "carried_out", "quarantined"), 0
            )
            | {"balanced": True},
            "events": {"decoded": 0, "merged": 0, "balanced": True},
            "tables": {},
            "balanced": True,
        },
        "reconcile": None,
    }
    jsonschema.validate(rep, json.loads(SCHEMA_FILE.read_text()))
    d.mkdir(parents=True, exist_ok=True)
    (d / "report.json").write_text(json.dumps(rep))
    if cfg is not None:
        append_audit_table(cfg, rep, parse_hour(hour))  # type: ignore[arg-type]
