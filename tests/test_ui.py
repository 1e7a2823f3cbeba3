"""The plugin's pages and path rules without a running Airflow (tests/test_airflow_services.py
drives them through a logged-in browser)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recon.airflow.ui import (
    PathRefused,
    dag_page,
    hour_reports,
    index_page,
    run_page,
    run_prefix,
    safe_path,
)
from tests.merge_util import pipeline


def _report(root: Path, hour: str, verdict: str, run_id: str, audited_by: str = "") -> None:
    d = root / hour
    d.mkdir(parents=True)
    rep = {"hour": hour, "verdict": verdict, "run_id": run_id, "findings": [], "tables": {}}
    rep["audited_by"] = audited_by or run_id
    (d / "report.json").write_text(json.dumps(rep))
    (d / "report.html").write_text(
        f"<!doctype html><html><head><style>h1{{}}</style></head><body><h1 id=verdict>"
        f"{verdict.upper()}</h1><p>hour {hour}</p></body></html>"
    )


def test_pages_list_hours_and_a_run_shows_only_its_hours(tmp_path: Path) -> None:
    cfg = pipeline(tmp_path, {"a.b": {}})
    root = cfg.warehouse / "audit" / "t"
    run_a = "scheduled__2026-01-01T00:00:00+00:00"
    _report(root, "2026-01-01T00", "pass", run_prefix(run_a) + "2026-01-01T00")
    _report(root, "2026-01-01T01", "fail", "manual__x_2026-01-01T01")
    assert [r["hour"] for r in hour_reports(cfg)] == ["2026-01-01T01", "2026-01-01T00"]
    assert [r["hour"] for r in hour_reports(cfg, limit=1)] == ["2026-01-01T01"]
    page = dag_page(cfg)
    assert "2026-01-01T00" in page and "FAIL" in page and "PASS" in page
    assert "recon_t" in index_page({"t": cfg}) and "1 / 0 / 1" in index_page({"t": cfg})
    run = run_page(cfg, run_a)
    assert "hour 2026-01-01T00" in run and "hour 2026-01-01T01" not in run
    assert "No audit report" in run_page(cfg, "manual__nothing")
    # an audit-only run that rewrote a report merged by another run shows it too
    _report(root, "2026-01-01T02", "warn", "sched_2026-01-01T02", "manual__audit_2026-01-01T02")
    assert "hour 2026-01-01T02" in run_page(cfg, "manual__audit")


def test_safe_path_refuses_everything_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "audit"
    (root / "h").mkdir(parents=True)
    (root / "h" / "report.json").write_text("{}")
    (tmp_path / "secret").write_text("x")
    (root / "out").symlink_to(tmp_path)
    assert safe_path(root, "h/report.json") == (root / "h" / "report.json").resolve()
    for bad in ("../secret", "h/../../secret", "/etc/passwd", "", "..\\secret"):
        with pytest.raises(PathRefused):
            safe_path(root, bad)
    with pytest.raises(PathRefused, match="leads out"):
        safe_path(root, "out/secret")
    with pytest.raises(FileNotFoundError):
        safe_path(root, "h/missing.json")
