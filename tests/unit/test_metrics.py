"""What a stage task sends as metrics (`recon.airflow.metrics`), from its summary and the hours'
reports; sent through Airflow's client in `tests/e2e/test_airflow_services.py`."""

from __future__ import annotations

from typing import Any

from recon.airflow.metrics import hour_metrics, stage_metrics


def _report(verdict: str, lag: float | None) -> dict[str, Any]:
    return {
        "verdict": verdict,
        "freshness": {"lag_seconds": lag},
        "identity": {
            "records": {"read": 12, "duplicates_in_hour": 2, "duplicates_of_earlier_hours": 1},
            "dispositions": {"quarantined": 1},
            "events": {"decoded": 8, "merged": 7},
        },
    }


def test_an_hours_gauges_come_from_its_report() -> None:
    assert hour_metrics(_report("warn", 30.5)) == {
        "records": 12, "duplicates": 3, "quarantined": 1, "events": 8, "events_merged": 7,
        "verdict": 1, "lag_seconds": 30.5,
    }  # fmt: skip
    assert "lag_seconds" not in hour_metrics(_report("pass", None))  # no source time known


def test_a_stage_sends_its_duration_and_the_audit_each_hours_verdict() -> None:
    gauges, counters = stage_metrics("p", "decode", {"seconds": 4.2, "records": 99}, [])
    assert gauges == {"recon.p.decode.seconds": 4.2, "recon.p.decode.records": 99.0}
    assert counters == []
    reports = [_report("pass", 1.0), _report("fail", 2.0)]
    gauges, counters = stage_metrics("p", "audit", {"seconds": 1.0}, reports)
    assert counters == ["recon.p.verdict.pass", "recon.p.verdict.fail"]
    assert gauges["recon.p.verdict"] == 2 and gauges["recon.p.audit.seconds"] == 1.0
