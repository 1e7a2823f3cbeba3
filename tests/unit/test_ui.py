"""The plugin's pages and path rules without a running Airflow (tests/test_airflow_services.py
drives them through a logged-in browser)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recon.airflow.ui import (
    PathRefused,
    dag_page,
    index_page,
    run_page,
    run_prefix,
    safe_path,
    trend_charts,
)
from tests.support.builders import pipeline
from tests.support.reports import write_report as _report


def test_pages_list_hours_and_a_run_shows_only_its_hours(tmp_path: Path) -> None:
    cfg = pipeline(tmp_path, {"a.b": {}})
    root = cfg.warehouse / "audit" / "t"
    run_a = "scheduled__2026-01-01T00:00:00+00:00"
    _report(root, "2026-01-01T00", "pass", run_prefix(run_a) + "2026-01-01T00", cfg=cfg)
    _report(root, "2026-01-01T01", "fail", "manual__x_2026-01-01T01", cfg=cfg)
    page = dag_page(cfg)
    assert "2026-01-01T00" in page and "FAIL" in page and "PASS" in page
    # the page reads the audit table, not the report files: an hour whose file is gone is listed
    saved = (root / "2026-01-01T00" / "report.json").read_text()
    (root / "2026-01-01T00" / "report.json").unlink()
    assert "2026-01-01T00</td>" in dag_page(cfg)
    (root / "2026-01-01T00" / "report.json").write_text(saved)
    # an hour whose last run failed before its audit is listed from its failed.json
    (root / "2026-01-01T05").mkdir()
    (root / "2026-01-01T05" / "failed.json").write_text(json.dumps({"stage": "merge"}))
    assert "did not run: merge failed" in dag_page(cfg)
    (root / "2026-01-01T05" / "failed.json").unlink()
    assert "recon_t" in index_page({"t": cfg}) and "1 / 0 / 1" in index_page({"t": cfg})
    run = run_page(cfg, run_a)
    assert "<b>2026-01-01T00</b>" in run and "<b>2026-01-01T01</b>" not in run
    assert "No audit report" in run_page(cfg, "manual__nothing")
    # an audit-only run that rewrote a report merged by another run shows it too
    _report(
        root, "2026-01-01T02", "warn", "sched_2026-01-01T02", "manual__audit_2026-01-01T02", cfg
    )
    assert "<b>2026-01-01T02</b>" in run_page(cfg, "manual__audit")
    # the run's hours come from the table; a torn report of one is shown as such
    (root / "2026-01-01T00" / "report.json").write_text('{"hour": "2026-01')
    assert "could not be read" in run_page(cfg, run_a)


def test_safe_path_refuses_everything_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "audit"
    (root / "h").mkdir(parents=True)
    (root / "h" / "report.json").write_text("{}")
    (tmp_path / "secret").write_text("x")
    (root / "out").symlink_to(tmp_path)
    assert safe_path(root, "h/report.json") == (root / "h" / "report.json").resolve()
    for bad in ("../secret", "h/../../secret", "/etc/passwd", "", "..\\secret", "h/\0x"):
        with pytest.raises(PathRefused):
            safe_path(root, bad)
    with pytest.raises(PathRefused, match="leads out"):
        safe_path(root, "out/secret")
    with pytest.raises(FileNotFoundError):
        safe_path(root, "h/missing.json")


def test_the_dag_page_charts_each_hour_from_the_audit_table(tmp_path: Path) -> None:
    """One column per audited hour for each measure, as high as its value against the
    highest, with its hour and value as a tooltip; a strip of the verdicts' colours."""
    rows = [
        {"hour": f"2026-01-01T0{i}", "verdict": v, "records": n, "quarantined": 0,
         "lag_seconds": None, "seconds": 2.5 * (i + 1)}
        for i, (v, n) in enumerate([("pass", 10), ("warn", 40), ("fail", 20)])
    ]  # fmt: skip
    t = trend_charts(rows)
    records = next(c for c in t["charts"] if c["label"] == "records read")
    assert [b["h"] for b in records["bars"]] == [12, 48, 24] and records["top"] == 40
    assert records["bars"][1]["title"] == "2026-01-01T01: 40"
    lag = next(c for c in t["charts"] if c["label"].startswith("lag"))
    assert [b["h"] for b in lag["bars"]] == [0, 0, 0]  # no value: no column
    assert [v["color"] for v in t["verdicts"]] == ["#1a7f37", "#9a6700", "#cf222e"]
    assert (t["first"], t["last"], t["width"]) == ("2026-01-01T00", "2026-01-01T02", 12)
    many = [dict(rows[0], hour=f"h{i:04d}") for i in range(400)]
    assert len(trend_charts(many)["verdicts"]) == 168  # a week of hours
