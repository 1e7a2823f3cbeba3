"""Airflow as users run it: a scheduler, dag-processor and api-server running; a backfill over
three hours through `airflow backfill create`; the audit verdicts read in a logged-in headless
Chromium from the plugin's views in the Airflow UI; the plugin's file route refuses `..`.

The pipeline starts three hours before the current hour, so unpausing its DAG (catchup on)
schedules nothing the backfill does not already cover: the backfill's runs exist first.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import urllib.error
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from recon.airflow.ui import run_prefix
from recon.cli import main
from recon.config import load_config
from recon.hours import format_hour
from recon.publish.export import export_rows
from recon.publish.iceberg import load_table
from tests.support.airflow_services import PASSWORD, USER, AirflowServices
from tests.support.browser import Browser
from tests.support.canal import write_canal_dump, write_canal_pipeline
from tests.support.postgres import Postgres
from tests.support.smtp import SmtpSink
from tests.support.statsd import StatsdSink
from tests.support.webhook import WebhookSink

NOW = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
START = NOW - timedelta(hours=3)
HOURS = [START + timedelta(hours=i) for i in range(3)]
DAG = "recon_bf"
CATALOG_PW = "RECON_TEST_CATALOG_PASSWORD"


def _backfill_runs(af: AirflowServices) -> list[dict]:
    runs = af.api("GET", f"/api/v2/dags/{DAG}/dagRuns?order_by=logical_date")["dag_runs"]
    return [x for x in runs if x["run_type"] == "backfill"]


def _task_instances(af: AirflowServices, run_id: str) -> dict[str, dict]:
    got = af.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances")
    return {t["task_id"]: t for t in got["task_instances"]}


def _drop_scheduled_runs(af: AirflowServices) -> None:
    """The DAG is unpaused for the backfill: when the suite crosses an hour boundary the
    scheduler starts the next hour's run, whose sensor waits hours for a dump no one writes (and,
    with max_active_runs=1, holds manual runs back). These tests are about the backfilled hours.
    The DAG is paused meanwhile, so the scheduler neither creates another run nor moves one it
    has in hand back to running between our PATCH and DELETE (the API refuses, 409, to delete a
    queued or running run); then unpaused again, as manual runs need it."""
    dag_url = f"/api/v2/dags/{DAG}"
    af.api("PATCH", dag_url, {"is_paused": True})
    runs_url = f"{dag_url}/dagRuns"

    def dropped() -> bool:
        left = [r for r in af.api("GET", runs_url)["dag_runs"] if r["run_type"] == "scheduled"]
        for r in left:
            run = f"{runs_url}/{r['dag_run_id']}"
            try:
                if r["state"] in ("queued", "running"):
                    af.api("PATCH", run, {"state": "failed"})
                af.api("DELETE", run)
            except urllib.error.HTTPError as e:
                if e.code not in (404, 409):  # gone already, or moved on since the listing
                    raise
        return not left

    af.wait(dropped, 120, "scheduled runs dropped")
    af.api("PATCH", dag_url, {"is_paused": False})


@pytest.fixture(scope="module")
def statsd() -> Iterator[StatsdSink]:
    """Where the services send Airflow's metrics, and the stages' (`recon.airflow.metrics`)."""
    sink = StatsdSink()
    yield sink
    sink.close()


@pytest.fixture(scope="module")
def webhook() -> Iterator[WebhookSink]:
    """Where the `late` pipeline's alerts are posted (a Slack incoming-webhook connection)."""
    sink = WebhookSink()
    yield sink
    sink.stop()


@pytest.fixture(scope="module")
def smtp() -> Iterator[SmtpSink]:
    """Where the `late` pipeline's alert emails go (the services' `smtp_default`)."""
    sink = SmtpSink()
    yield sink
    sink.stop()


@pytest.fixture(scope="module")
def backfilled(
    tmp_path_factory: pytest.TempPathFactory,
    statsd: StatsdSink,
    webhook: WebhookSink,
    smtp: SmtpSink,
) -> Iterator[tuple[AirflowServices, Path, Postgres]]:
    """Production's shape (issue 13 items 2 and 3): Airflow's metadata database and the Iceberg
    catalog on PostgreSQL, the catalog's password read from the environment (`${...}`)."""
    tmp = tmp_path_factory.mktemp("airflow-services")
    pg = Postgres().start()
    secret = {CATALOG_PW: pg.password}
    os.environ.update(secret)  # this process reads the tables too
    write_canal_dump(tmp / "raw", "bf", START, 3, seed=5)
    catalog = {
        "type": "sql",
        "uri": pg.uri("iceberg", password="${" + CATALOG_PW + "}"),
        "warehouse": f"file://{tmp}/wh_dag/iceberg",
    }
    write_canal_pipeline(
        tmp / "pipelines", "bf", tmp / "raw", tmp / "wh_dag", START, retention_hours=2,
        catalog=catalog,
    )  # fmt: skip
    # paused until its test: no dump ever comes, its hours miss their deadline (one minute)
    (tmp / "raw_late").mkdir()
    notify = {"slack_conn_id": "late_slack", "email": ["oncall@example.com"], "deadline_minutes": 1}
    write_canal_pipeline(tmp / "pipelines", "late", tmp / "raw_late", tmp / "wh_late", START,
                         notify=notify)  # fmt: skip
    hook = {
        "AIRFLOW_CONN_LATE_SLACK": webhook.connection(),
        "AIRFLOW_CONN_SMTP_DEFAULT": smtp.connection(),
    }
    af = AirflowServices(
        tmp / "airflow", tmp / "pipelines", pg.uri("airflow"), **secret, **statsd.env(), **hook
    )
    try:
        af.start()
        af.wait(lambda: af._get(f"/api/v2/dags/{DAG}"), 180, f"{DAG} parsed")
        # the DAG reached Airflow's metadata database on PostgreSQL
        assert pg.sql(f"SELECT dag_id FROM dag WHERE dag_id = '{DAG}'", db="airflow") == DAG
        r = af.airflow(
            "backfill", "create", "--dag-id", DAG,
            "--from-date", HOURS[0].isoformat(), "--to-date", HOURS[-1].isoformat(),
            "--reprocess-behavior", "failed",  # needed: decode and merge depend on the past
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        af.api("PATCH", f"/api/v2/dags/{DAG}", {"is_paused": False})

        def finished() -> list[dict] | None:
            runs = _backfill_runs(af)
            done = [x for x in runs if x["state"] in ("success", "failed")]
            return runs if len(runs) >= 3 and len(done) == len(runs) else None

        runs = af.wait(finished, 1200, "three backfill runs finished")
        assert [x["state"] for x in runs] == ["success"] * 3, json.dumps(runs, indent=1)
        _drop_scheduled_runs(af)
        yield af, tmp, pg
    finally:
        af.stop()
        pg.stop()
        os.environ.pop(CATALOG_PW, None)


def test_backfill_of_three_hours_equals_recon_run(
    backfilled: tuple[AirflowServices, Path, Postgres],
) -> None:
    af, tmp, pg = backfilled
    runs = _backfill_runs(af)
    # each run processed its own data interval: a real one-hour interval per scheduled hour
    assert [x["data_interval_start"][:13] for x in runs] == [format_hour(h) for h in HOURS]
    direct = write_canal_pipeline(tmp / "direct", "bf", tmp / "raw", tmp / "wh_run", START)
    assert (
        main(
            [
                "run",
                "--pipeline",
                str(direct),
                "--from",
                format_hour(HOURS[0]),
                "--to",
                format_hour(HOURS[-1]),
            ]
        )
        == 0
    )
    dag_rows = list(export_rows(load_config(tmp / "pipelines" / "bf.yaml"), "shop.orders"))
    run_rows = list(export_rows(load_config(direct), "shop.orders"))
    assert dag_rows == run_rows and len(dag_rows) >= 3
    for h in HOURS:
        a = json.loads(
            (tmp / "wh_dag" / "audit" / "bf" / format_hour(h) / "report.json").read_text()
        )
        b = json.loads(
            (tmp / "wh_run" / "audit" / "bf" / format_hour(h) / "report.json").read_text()
        )
        assert a["verdict"] == b["verdict"]
        assert a["tables"]["shop.orders"]["checksum"] == b["tables"]["shop.orders"]["checksum"]
        assert a["input"] == b["input"] and a["identity"]["balanced"]
    # the published table lives in the PostgreSQL catalog, its password read from the environment
    names = pg.sql("SELECT table_namespace || '.' || table_name FROM iceberg_tables", db="iceberg")
    assert set(names.splitlines()) == {"bf__shop.orders", "bf__recon_audit.hours"}
    # retention_hours 2: each run's expire task kept the last two hours' versions, freed hour 0's
    versions = load_table(load_config(tmp / "pipelines" / "bf.yaml"), "shop.orders").snapshots()
    assert {v.summary.additional_properties["recon.hour"] for v in versions} == {
        format_hour(HOURS[1]),
        format_hour(HOURS[2]),
    }
    for x in runs:
        ti = _task_instances(af, x["dag_run_id"])
        assert ti["expire"]["state"] == "success"
        # the Spark stages ran in the pool the database's setup created (recon.airflow.pool)
        pools = {ti[t]["pool"] for t in ("spark_app", "decode", "merge_publish", "audit")}
        assert pools == {"recon_spark"}
    assert af.api("GET", "/api/v2/pools/recon_spark")["slots"] == 2
    # a backfill runs up to ten runs at once, but an hour's Spark application starts only once
    # the hour before has decoded (its dump sensor waits for it): at most two are open, not ten
    # idle ones waiting their turn to decode
    tis = [_task_instances(af, x["dag_run_id"]) for x in runs]
    for before, after in zip(tis, tis[1:], strict=False):
        assert after["spark_app"]["start_date"] >= before["decode"]["end_date"], (before, after)
    # setting it up again (a second compose `up`) leaves the operator's pool as it is
    again = subprocess.run(
        [sys.executable, "-m", "recon.airflow.pool", "recon_spark", "7"],
        env=af.env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "left as it is" in again.stdout
    assert af.api("GET", "/api/v2/pools/recon_spark")["slots"] == 2


def test_an_hour_not_published_by_its_deadline_is_alerted(
    backfilled: tuple[AirflowServices, Path, Postgres], webhook: WebhookSink, smtp: SmtpSink
) -> None:
    """`notify.deadline_minutes`: Airflow's deadline alert. Unpaused, the `late` pipeline's DAG
    catches up its first hour, whose dump never comes: the scheduler sees the hour not published
    a minute after its end and the triggerer runs `recon.airflow.alerts.hour_late`, which posts
    to the pipeline's Slack webhook and emails its address."""
    af = backfilled[0]
    dag = "/api/v2/dags/recon_late"
    af.wait(lambda: af._get(dag), 180, "recon_late parsed")
    af.api("PATCH", dag, {"is_paused": False})
    first = format_hour(START)
    try:
        texts = af.wait(webhook.texts, 300, "a deadline alert posted")
    finally:
        af.api("PATCH", dag, {"is_paused": True})
        for r in af.api("GET", f"{dag}/dagRuns")["dag_runs"]:
            if r["state"] in ("queued", "running"):
                af.api("PATCH", f"{dag}/dagRuns/{r['dag_run_id']}", {"state": "failed"})
    assert any(
        t.startswith(f"[recon] recon_late: hour {first} is not published 1 min after its end")
        for t in texts
    ), texts
    runs = af.api("GET", f"{dag}/dagRuns")["dag_runs"]
    assert {r["run_type"] for r in runs} == {"scheduled"}
    mails = af.wait(lambda: smtp.messages, 120, "a deadline alert emailed")
    to, mail = mails[0]
    assert to == ["oncall@example.com"]
    assert mail["Subject"].startswith(f"[recon] recon_late: hour {first} is not published")


def test_each_hour_sends_its_metrics(
    backfilled: tuple[AirflowServices, Path, Postgres], statsd: StatsdSink
) -> None:
    """Through Airflow's StatsD client (`[metrics] statsd_on`): each audited hour's gauges and
    verdict counter, and each stage's duration, as the hours' reports say."""
    _, tmp, _ = backfilled
    sink = statsd
    assert sink.values("airflow.recon.bf.verdict.pass") == ["1|c"] * 3
    reports = [
        json.loads((tmp / "wh_dag" / "audit" / "bf" / format_hour(h) / "report.json").read_text())
        for h in HOURS
    ]
    sent = [float(v.removesuffix("|g")) for v in sink.values("airflow.recon.bf.records")]
    assert sent == [r["identity"]["records"]["read"] for r in reports] and min(sent) > 0
    assert sink.values("airflow.recon.bf.verdict") == ["0|g"] * 3
    for name in ("quarantined", "duplicates", "events", "lag_seconds"):
        assert len(sink.values(f"airflow.recon.bf.{name}")) == 3, name
    for stage in ("decode", "merge", "audit"):
        assert len(sink.values(f"airflow.recon.bf.{stage}.seconds")) == 3, stage
    assert sink.values("airflow.scheduler_heartbeat")  # Airflow's own, to the same listener


def _login(b: Browser, url: str) -> None:
    b.goto(url + "/")
    b.wait_for(
        "location.pathname.startsWith('/auth') && !!document.querySelector('input[name=password]')"
    )
    b.type_into("input[name=username]", USER)
    b.type_into("input[name=password]", PASSWORD)
    b.wait_for("!document.querySelector('button[type=submit]').disabled")
    b.js("document.querySelector('button[type=submit]').click()")
    b.wait_for("!location.pathname.startsWith('/auth')")


def test_verdicts_in_the_airflow_ui(backfilled: tuple[AirflowServices, Path, Postgres]) -> None:
    af, tmp, _ = backfilled
    run = _backfill_runs(af)[1]
    report = json.loads(
        (tmp / "wh_dag" / "audit" / "bf" / format_hour(HOURS[1]) / "report.json").read_text()
    )
    views = {
        v["destination"]: v["href"]
        for p in af.api("GET", "/api/v2/plugins")["plugins"]
        if p["name"] == "recon"
        for v in p["external_views"]
    }
    assert views == {
        "nav": "recon/",
        "dag": "recon/dags/{DAG_ID}",
        "dag_run": "recon/dags/{DAG_ID}/runs/{RUN_ID}",
    }
    b = Browser()
    try:
        # not logged in: the plugin's page is not served
        b.goto(f"{af.url}/recon/dags/{DAG}")
        assert "Not authenticated" in b.wait_for("document.body && document.body.innerText")
        _login(b, af.url)
        # the DAG-run view: Airflow's UI with the plugin's page in its iframe
        b.goto(f"{af.url}/dags/{DAG}/runs/{run['dag_run_id']}/plugin/recon-run")
        b.wait_for("!!document.querySelector('iframe')")
        frame = af.wait(
            lambda: next((t for t in b.frame_texts() if "identity" in t.lower()), None),
            60, "the run's report inside the UI",
        )  # fmt: skip
        assert f"{DAG}: run {run['dag_run_id']}" in frame
        assert f"{format_hour(HOURS[1])}: {report['verdict'].upper()}" in frame
        assert format_hour(HOURS[0]) not in frame  # only the hour this run merged
        # the DAG view lists every hour with its verdict
        b.goto(f"{af.url}/dags/{DAG}/plugin/recon-dag")
        b.wait_for("!!document.querySelector('iframe')")
        listing = af.wait(
            lambda: next((t for t in b.frame_texts() if "audit per hour" in t), None), 60
        )
        for h in HOURS:
            assert format_hour(h) in listing
        assert listing.count(report["verdict"].upper()) >= 1
    finally:
        b.close()


def _raw_get(af: AirflowServices, path: str, token: str | None) -> tuple[int, str]:
    """A request sent as written: no client-side `..` folding, the UI's cookie as credential."""
    conn = http.client.HTTPConnection("localhost", af.port, timeout=30)
    conn.request("GET", path, headers={"Cookie": f"_token={token}"} if token else {})
    r = conn.getresponse()
    return r.status, r.read().decode(errors="replace")


def test_plugin_files_only_under_the_audit_root(
    backfilled: tuple[AirflowServices, Path, Postgres],
) -> None:
    af, tmp, _ = backfilled
    token = af.token()
    ok, body = _raw_get(af, f"/recon/files/bf/{format_hour(HOURS[0])}/report.json", token)
    assert ok == 200 and json.loads(body)["hour"] == format_hour(HOURS[0])
    assert _raw_get(af, f"/recon/files/bf/{format_hour(HOURS[0])}/report.json", None)[0] == 401
    (tmp / "wh_dag" / "secret.txt").write_text("not a report")
    for path in (
        "/recon/files/bf/../secret.txt",
        "/recon/files/bf/%2e%2e/secret.txt",
        "/recon/files/bf/..%2F..%2Fsecret.txt",
        f"/recon/files/bf/{format_hour(HOURS[0])}/../../secret.txt",
    ):
        status, body = _raw_get(af, path, token)
        assert status == 403 and "refused" in body, (path, status, body)
    (tmp / "wh_dag" / "audit" / "bf" / "link").symlink_to(tmp / "wh_dag")
    status, body = _raw_get(af, "/recon/files/bf/link/secret.txt", token)
    assert status == 403 and "leads out of the audit root" in body


def test_a_manual_run_without_logical_date_takes_its_hour_from_the_form(
    backfilled: tuple[AirflowServices, Path, Postgres],
) -> None:
    af, tmp, _ = backfilled
    runs_url = f"/api/v2/dags/{DAG}/dagRuns"
    # the trigger form's params are validated: a malformed hour is refused before any run exists
    try:
        af.api("POST", runs_url, {"logical_date": None, "conf": {"hour": "yesterday"}})
        raise AssertionError("a malformed hour was accepted")
    except urllib.error.HTTPError as err:
        assert err.code == 400 and "hour" in err.read().decode()
    _drop_scheduled_runs(af)
    report = tmp / "wh_dag" / "audit" / "bf" / format_hour(HOURS[2]) / "report.json"
    written = json.loads(report.read_text())["generated_at"]
    # the hour as Airflow shows a logical date (an ISO datetime): taken as its hour
    iso = (HOURS[2] + timedelta(minutes=30)).isoformat()
    run = af.api(
        "POST", runs_url, {"logical_date": None, "conf": {"hour": iso, "audit_only": True}}
    )
    assert run["logical_date"] is None

    def done() -> dict | None:
        r = af.api("GET", f"{runs_url}/{run['dag_run_id']}")
        return r if r["state"] in ("success", "failed") else None

    assert af.wait(done, 600, "the manual run")["state"] == "success"
    tis = af.api("GET", f"{runs_url}/{run['dag_run_id']}/taskInstances")["task_instances"]
    states = {t["task_id"]: t["state"] for t in tis}
    assert states["decode"] == states["merge_publish"] == "skipped"
    assert states["audit"] == states["announce"] == "success"
    rewritten = json.loads(report.read_text())
    assert rewritten["generated_at"] >= written
    # the report says which run rewrote it, so that run's tab in the UI shows it
    assert rewritten["audited_by"] == run_prefix(run["dag_run_id"]) + format_hour(HOURS[2])
    assert rewritten["run_id"] != rewritten["audited_by"]  # the merge was another run's
    xcom = af.api(
        "GET",
        f"{runs_url}/{run['dag_run_id']}/taskInstances/hours/xcomEntries/return_value"
        "?deserialize=true&stringify=false",
    )["value"]
    xcom = json.loads(xcom) if isinstance(xcom, str) else xcom
    assert (xcom["from"], xcom["to"], xcom["audit_only"]) == (
        format_hour(HOURS[2]),
        format_hour(HOURS[2]),
        True,
    )
