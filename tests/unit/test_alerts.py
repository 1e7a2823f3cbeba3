"""The alerts' own decisions (`recon.airflow.alerts`); the sending is tested through Airflow in
tests/e2e (a failed task: test_airflow_e2e; a missed deadline: test_airflow_services)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from recon.airflow.alerts import deadline_alert, hour_late
from recon.config import load_config
from tests.support.canal import write_canal_pipeline

START = datetime(2026, 12, 1, 0, tzinfo=UTC)


def _run(run_type: str) -> dict[str, object]:
    return {
        "dag_id": "recon_p",
        "dag_run_id": f"{run_type}__2026-12-01T10:00:00+00:00",
        "run_type": run_type,
        "state": "running",
        "data_interval_start": "2026-12-01T10:00:00Z",
    }


def test_a_backfill_or_manual_run_of_a_past_hour_sends_no_deadline_alert() -> None:
    """They are late by construction; `hour_late` logs them and never opens a connection (the
    one named here does not exist: sending would fail)."""
    for run_type in ("backfill", "manual"):
        ctx = {"dag_run": _run(run_type), "deadline": {"deadline_time": "2026-12-01T11:30Z"}}
        said = asyncio.run(
            hour_late(ctx, 30, ["oncall@example.com"], None, "no_such_smtp", "no_such_slack")
        )
        assert said == (
            "not sent: [recon] recon_p: hour 2026-12-01T10 is not published 30 min after its "
            f"end (deadline 2026-12-01T11:30Z); run {run_type}__2026-12-01T10:00:00+00:00 is "
            "running"
        )


def test_the_deadline_is_the_hours_end_plus_the_minutes(tmp_path: Path) -> None:
    """The logical date of the hourly data-interval timetable is the hour's start: the deadline
    is one hour and `deadline_minutes` after it; no `deadline_minutes`, no deadline."""
    raw, wh = tmp_path / "raw", tmp_path / "wh"
    notify = {"slack_conn_id": "s", "deadline_minutes": 45}
    cfg = load_config(write_canal_pipeline(tmp_path, "p", raw, wh, START, notify=notify))
    alert = deadline_alert(cfg)
    assert alert.interval == timedelta(hours=1, minutes=45)
    assert type(alert.reference).__name__ == "DagRunLogicalDateDeadline"
    assert alert.callback.path == "recon.airflow.alerts.hour_late"
    assert alert.callback.kwargs["slack_conn_id"] == "s"
    plain = load_config(write_canal_pipeline(tmp_path, "q", raw, wh, START))
    assert deadline_alert(plain) is None
