"""The audit table (`recon.audit.table`): what the UI's trends and each report's comparison
with the day before read."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pyarrow as pa

from recon.audit.table import AUDIT_TABLE, SCHEMA, audit_rows, day_before, day_comparison
from recon.hours import parse_hour
from recon.layout import write_json_atomic
from recon.publish.iceberg import get_catalog, identifier
from tests.support.builders import pipeline
from tests.support.reports import write_report


def test_a_table_written_before_the_seconds_column_gains_it(tmp_path: Path) -> None:
    """A pipeline audited by an earlier version has a table without `seconds`: the next audit
    adds the column (older rows read null) instead of failing on the schema."""
    cfg = pipeline(tmp_path, {"a.b": {}})
    cat = get_catalog(cfg)
    ident = identifier(cat, cfg, AUDIT_TABLE)
    cat.create_namespace_if_not_exists(ident[:-1])
    old = pa.schema([f for f in SCHEMA if f.name != "seconds"])
    table = cat.create_table(ident, schema=old)
    row = dict.fromkeys(old.names) | {"hour": "2026-01-01T00", "verdict": "pass", "findings": "[]"}
    table.append(pa.Table.from_pylist([row], schema=old))
    root = cfg.warehouse / "audit" / "t"
    h1 = parse_hour("2026-01-01T01")
    write_json_atomic(cfg.layout.timings(h1), {"decode": 1.5, "merge": 2.25, "audit": 9.0})
    write_report(root, "2026-01-01T01", "warn", "r1", cfg=cfg)
    rows = audit_rows(cfg)
    assert [(r["hour"], r["seconds"]) for r in rows] == [
        ("2026-01-01T00", None),
        ("2026-01-01T01", 3.75),  # decode + merge of the hour's last successful run
    ]


def test_the_day_before_is_the_24_hours_before_the_hour(tmp_path: Path) -> None:
    cfg = pipeline(tmp_path, {"a.b": {}})
    root = cfg.warehouse / "audit" / "t"
    h = parse_hour("2026-01-02T05")
    for back in (25, 24, 3, 1):  # 25 hours before is not in the day before
        write_report(root, (h - timedelta(hours=back)).strftime("%Y-%m-%dT%H"), "pass", "r",
                     cfg=cfg)  # fmt: skip
    assert [r["hour"] for r in day_before(cfg, h)] == [
        "2026-01-01T05", "2026-01-02T02", "2026-01-02T04",
    ]  # fmt: skip
    write_report(root, "2026-01-02T05", "warn", "r", cfg=cfg)
    report = json.loads((root / "2026-01-02T05" / "report.json").read_text())
    compared = {c["label"]: c for c in day_comparison(cfg, h, report)}
    records = compared["records read"]
    assert records["hours"] == 3 and records["day_before"] == 0 and records["median"] == 0
    assert not day_comparison(cfg, parse_hour("2025-01-01T00"), report)  # no day before
