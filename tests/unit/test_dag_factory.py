"""The DAG factory's pure parts: which hours a run processes, and what an Asset event says."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from recon.airflow.dag_factory import asset_extras, dump_complete, resolve_hours
from tests.support.builders import write_pipeline

NOW = datetime(2026, 11, 20, 5, 30, tzinfo=UTC)


def test_hours_come_from_params_then_the_interval_then_the_last_complete_hour() -> None:
    interval = datetime(2026, 11, 20, 2, tzinfo=UTC)
    assert resolve_hours({}, interval, NOW)["from"] == "2026-11-20T02"
    assert resolve_hours({}, None, NOW) | {} == {
        "from": "2026-11-20T04",
        "to": "2026-11-20T04",
        "audit_only": False,
        "tables": "",
        "rebuild": "false",
        "allow_incomplete": "false",
    }
    got = resolve_hours(
        {"hour": "2026-11-19T22", "hour_to": "2026-11-20T01", "tables": ["a.b", "c.d"]},
        interval,
        NOW,
    )
    assert (got["from"], got["to"], got["tables"]) == ("2026-11-19T22", "2026-11-20T01", "a.b,c.d")
    assert resolve_hours({"rebuild_from_snapshot": True}, interval, NOW)["rebuild"] == "true"
    assert resolve_hours({"allow_incomplete": True}, interval, NOW)["allow_incomplete"] == "true"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"hour": "2026-11-20T03", "hour_to": "2026-11-20T01"}, "before hour"),
        ({"audit_only": True, "rebuild_from_snapshot": True}, "exclude each other"),
    ],
)
def test_contradictory_params_are_refused(params: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_hours(params, None, NOW)


def test_asset_extras_carry_the_verdict_and_say_which_tables_were_merged() -> None:
    report = {
        "hour": "2026-11-20T02",
        "verdict": "warn",
        "tables": {"a.b": {"rows_after": 7, "applied": 3, "published_snapshot_id": 11}},
    }
    got = asset_extras(report, ["a.b", "c.d"], ["a.b"], "/r.html")
    assert got["a.b"] == {
        "hour": "2026-11-20T02",
        "merged": True,
        "verdict": "warn",
        "rows": 7,
        "applied": 3,
        "snapshot_id": 11,
        "report": "/r.html",
    }
    assert got["c.d"]["merged"] is False and got["c.d"]["rows"] is None


def test_the_form_accepts_a_logical_date_and_takes_its_hour() -> None:
    import re

    from recon.airflow.dag_factory import HOUR_PATTERN

    got = resolve_hours(
        {"hour": "2026-11-20T05:00:00+00:00", "hour_to": "2026-11-20T07:10:00Z"}, None, NOW
    )
    assert (got["from"], got["to"]) == ("2026-11-20T05", "2026-11-20T07")
    for text in ("2026-11-20T05", "2026-11-20T05:00:00+00:00", "2026-11-20 05:00:00Z"):
        assert re.match(HOUR_PATTERN, text), text
    with pytest.raises(ValueError, match="not a valid"):
        resolve_hours({"hour": "2026-02-30T05:00:00Z"}, None, NOW)


def test_a_fail_verdict_fails_the_audit_for_good_and_an_error_is_retried() -> None:
    """Issue 79 item 5: the audit task has retries for errors; a `fail` verdict (its summary
    names failed hours) raises AirflowFailException, which Airflow does not retry."""
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from recon.airflow.lineage import settled

    err = AirflowException("audit exited 3 in the run's Spark application")
    verdict = {"stage": "audit", "failed_hours": ["2026-11-20T00"], "verdicts": {}}
    answer = settled(err, verdict)
    assert isinstance(answer, AirflowFailException) and "2026-11-20T00" in str(answer)
    for summary in (None, {"stage": "audit", "failed_hours": []}, {**verdict, "stage": "merge"}):
        assert settled(err, summary) is err  # a crash, or another stage: retried


def test_an_incomplete_hour_waits_unless_the_run_allows_it(tmp_path: Path) -> None:
    raw = tmp_path / "raw" / "t" / "dt=2026-11-20" / "hour=02"
    raw.mkdir(parents=True)
    (raw / "part-0.parquet").write_bytes(b"")  # no _SUCCESS yet
    p = write_pipeline(tmp_path / "p.yaml", name="p", format="canal_json", topics=["t"])
    h = resolve_hours({"hour": "2026-11-20T02"}, None, NOW)
    assert dump_complete(str(p), dict(h)) is False
    allowed = resolve_hours({"hour": "2026-11-20T02", "allow_incomplete": True}, None, NOW)
    assert dump_complete(str(p), dict(allowed)) is True
    (raw / "_SUCCESS").write_bytes(b"")
    assert dump_complete(str(p), dict(h)) is True
