"""End to end through Airflow: `airflow dags test` of a pipeline's DAG for two consecutive hours
(two DAG runs, the hour from the run's params), real spark-submit on local Spark, SQLite metadata
database; the published table and the reports must equal what `recon run` makes of the same dump.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from recon.cli import main
from recon.config import load_config
from recon.core.model import RawRecord
from recon.demo import sample
from recon.demo.airflow_local import airflow_env, dags_test, migrate
from recon.demo.demo import write_dump
from recon.hours import format_hour
from recon.publish.export import export_rows
from recon.publish.history import load_history
from recon.publish.iceberg import load_table
from tests.support.canal import write_canal_dump, write_canal_pipeline
from tests.support.s3 import make_bucket, moto_server, upload, use_s3
from tests.support.smtp import SmtpSink
from tests.support.webhook import WebhookSink

START = datetime(2026, 6, 1, 0, tzinfo=UTC)
H0, H1 = START, START + timedelta(hours=1)


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A bucket on moto's S3 server, the environment (and the Airflow and Spark processes
    started with it) pointed at it."""
    with moto_server() as url:
        use_s3(monkeypatch, url)
        yield make_bucket("lake-af")


HISTORY = {"shop.orders": {"history": True}}


def test_two_hours_through_airflow_equal_recon_run(spark, tmp_path: Path, s3: str) -> None:
    """The DAG's pipeline reads its dumps from S3 and publishes its table there
    (docs/deployment.md "Object stores"); `recon run`'s reads and writes local folders. The
    table keeps a history (`history: true`): the DAG's, on S3, holds the same versions."""
    write_canal_dump(tmp_path / "raw", "af", START, 2, seed=11)
    upload(tmp_path / "raw", f"{s3}/raw")
    dag_cfg = write_canal_pipeline(
        tmp_path / "pipelines", "af", f"{s3}/raw", tmp_path / "wh_dag", START,
        catalog={"warehouse": f"{s3}/ice"}, tables=HISTORY,
    )  # fmt: skip
    lineage_file = tmp_path / "openlineage.jsonl"
    env = dict(
        airflow_env(tmp_path / "airflow", tmp_path / "pipelines"),
        AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(
            {"type": "file", "log_file_path": str(lineage_file), "append": True}
        ),
    )
    migrate(env)
    for h in (H0, H1):
        state = dags_test(
            env, "recon_af", format_hour(h), log=tmp_path / f"dag-{format_hour(h)}.log"
        )
        assert state == "success", (tmp_path / f"dag-{format_hour(h)}.log").read_text()[-3000:]
    _stages_reported_their_lineage(lineage_file, s3)
    # issue 13 item 7: each stage task logs its structured summary after spark-submit's folded
    # output, with the library's progress line inside it
    log = (tmp_path / f"dag-{format_hour(H1)}.log").read_text()
    # the stages ran in the run's one Spark application (its setup task started it, its
    # teardown stopped it), not a spark-submit each
    assert "::group::merge_publish in the run's Spark application" in log
    assert "::group::spark-submit" not in log
    assert "the run's Spark application stopped" in log
    assert f"recon.ops.run: merge: hour 1 of 1 ({format_hour(H1)}) done" in log
    summaries = [json.loads(m) for m in re.findall(r"recon-summary (\{.*?\})(?:\s|$)", log)]
    merge = next(x for x in summaries if x["stage"] == "merge")
    assert (
        merge["hours"] == [format_hour(H1)] and merge["pipeline"] == "af" and merge["records"] > 0
    )
    # the same dump through `recon run`, in another warehouse
    run_cfg = write_canal_pipeline(
        tmp_path / "direct", "af", tmp_path / "raw", tmp_path / "wh_run", START, tables=HISTORY
    )
    assert (
        main(
            ["run", "--pipeline", str(run_cfg), "--from", format_hour(H0), "--to", format_hour(H1)]
        )
        == 0
    )
    dag_rows = list(export_rows(load_config(dag_cfg), "shop.orders"))
    run_rows = list(export_rows(load_config(run_cfg), "shop.orders"))
    assert dag_rows == run_rows and len(dag_rows) >= 3
    dag_hist, run_hist = (
        sorted(
            load_history(load_config(c), "shop.orders").scan().to_arrow().to_pylist(),
            key=lambda r: (r["__key"], r["__order_key"]),
        )
        for c in (dag_cfg, run_cfg)
    )
    assert dag_hist == run_hist and len(dag_hist) > len(dag_rows)
    for h in (H0, H1):
        a = json.loads(
            (tmp_path / "wh_dag" / "audit" / "af" / format_hour(h) / "report.json").read_text()
        )
        b = json.loads(
            (tmp_path / "wh_run" / "audit" / "af" / format_hour(h) / "report.json").read_text()
        )
        assert a["verdict"] == b["verdict"] == "pass"
        assert a["tables"]["shop.orders"]["checksum"] == b["tables"]["shop.orders"]["checksum"]
        assert a["identity"]["balanced"] and a["input"] == b["input"]
    # the published table is an Asset each run updated, with the verdict and counts as extras
    import sqlite3

    db = sqlite3.connect(tmp_path / "airflow" / "airflow.db")
    events = db.execute(
        "SELECT a.name, a.uri, e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id"
    ).fetchall()
    # named as the catalog and the lineage name the table, at the table's location
    location = load_table(load_config(dag_cfg), "shop.orders").location()
    assert [(name, uri) for name, uri, _ in events] == [("af__shop.orders", location)] * 2
    extras = [json.loads(x) for _, _, x in events]
    assert [(x["hour"], x["verdict"]) for x in extras] == [
        (format_hour(H0), "pass"),
        (format_hour(H1), "pass"),
    ]
    assert extras[-1]["rows"] == len(dag_rows)
    # a manual run with the trigger form's rebuild: the state is dropped and every decoded hour
    # merged again; the published table is the same
    h0_result = (
        tmp_path / "wh_dag" / "_state" / "af" / "merge" / "hours" / f"hour={format_hour(H0)}.json"
    )
    h0_run = json.loads(h0_result.read_text())["run_id"]
    log = tmp_path / "dag-rebuild.log"
    params = {"tables": ["shop.orders"], "rebuild_from_snapshot": True}
    assert dags_test(env, "recon_af", format_hour(H1), log=log, params=params) == "success", (
        log.read_text()[-3000:]
    )
    assert list(export_rows(load_config(dag_cfg), "shop.orders")) == run_rows
    man = json.loads(
        (tmp_path / "wh_dag" / "_state" / "af" / "merge" / "manifest.json").read_text()
    )
    assert man["reset"]["tables"] == ["shop.orders"] and man["hours"] == [
        format_hour(H0),
        format_hour(H1),
    ]
    assert json.loads(h0_result.read_text())["run_id"] != h0_run  # hour 0 was merged again


def _stages_reported_their_lineage(lineage_file: Path, bucket: str) -> None:
    """OpenLineage events through Airflow's provider (file transport): the decode read the raw
    topic's folder (on S3), the merge wrote the published table."""
    done: dict[str, Any] = {}
    for line in lineage_file.read_text().splitlines():
        ev = json.loads(line)
        if ev.get("eventType") == "COMPLETE":
            done[ev["job"]["name"]] = ev
    decode, merge = done["recon_af.decode"], done["recon_af.merge_publish"]
    assert [(d["namespace"], d["name"]) for d in decode["inputs"]] == [(bucket, "raw/af")]
    assert [d["name"] for d in merge["outputs"]] == ["af__shop.orders"]
    assert merge["outputs"][0]["namespace"] == f"{bucket}/ice"


def _failing_pipeline(tmp_path: Path, name: str, **extra: object) -> None:
    """A pipeline whose hour H0 has a garbage record: its audit's verdict is `fail`."""
    recs = sample.to_records(sample.encode_canal_json(sample.workload(START, 1, 6, seed=3)), name)
    recs.append(RawRecord(name, 0, len(recs), None, b"\x00garbage", recs[-1].ts_ms))
    write_dump(tmp_path / "raw", name, recs, "jsonl", [H0])
    write_canal_pipeline(
        tmp_path / "pipelines", name, tmp_path / "raw", tmp_path / "wh", START, **extra
    )


def test_a_failing_verdict_fails_the_run_and_announces_nothing(tmp_path: Path) -> None:
    """The audit's `fail` makes the DAG run red, no Asset event is sent (the leaf used to run on
    all_done and the run was green), and the pipeline's `notify` gets one email and one Slack
    message, from the failed audit task, through Airflow's SMTP and Slack webhook notifiers
    (a local SMTP server and a local HTTP server)."""
    smtp, hook = SmtpSink(), WebhookSink()
    notify = {"email": ["oncall@example.com"], "slack_conn_id": "oncall_slack"}
    _failing_pipeline(tmp_path, "af", notify=notify)
    env = airflow_env(tmp_path / "airflow", tmp_path / "pipelines")
    env["AIRFLOW_CONN_SMTP_DEFAULT"] = smtp.connection()
    env["AIRFLOW_CONN_ONCALL_SLACK"] = hook.connection()
    migrate(env)
    log = tmp_path / "dag.log"
    try:
        state = dags_test(env, "recon_af", format_hour(H0), log=log)
    finally:
        smtp.stop()
        hook.stop()
    assert state == "failed", log.read_text()[-3000:]
    [posted] = hook.texts()
    assert "[recon] recon_af: task audit failed" in posted
    assert "audit verdict fail for hour(s) " + format_hour(H0) in posted
    assert len(smtp.messages) == 1, smtp.messages
    to, mail = smtp.messages[0]
    assert to == ["oncall@example.com"] and mail["From"] == "recon@test"
    assert mail["Subject"].startswith("[recon] recon_af: audit failed")
    body = (
        mail.get_payload(decode=True)
        if not mail.is_multipart()
        else b"".join(
            p.get_payload(decode=True) or b"" for p in mail.walk() if not p.is_multipart()
        )
    )
    assert b"audit verdict fail for hour(s) " + format_hour(H0).encode() in body
    # the audit ran in the run's Spark application and failed there; a failed stage stops the
    # application, so a retry (or a clear) starts from a fresh process
    text = log.read_text()
    assert "::group::audit in the run's Spark application" in text
    assert "audit exited 3 in the run's Spark application" in text  # a verdict, not an error
    assert "audit verdict fail for hour(s)" in text
    assert "stopped the run's Spark application after the failed stage" in text
    report = json.loads(
        (tmp_path / "wh" / "audit" / "af" / format_hour(H0) / "report.json").read_text()
    )
    assert report["verdict"] == "fail"  # the garbage record is quarantined
    import sqlite3

    db = sqlite3.connect(tmp_path / "airflow" / "airflow.db")
    states = dict(db.execute("SELECT task_id, state FROM task_instance").fetchall())
    assert states["audit"] == "failed" and states["announce"] == "upstream_failed"
    # failed for good at once, though the task has retries: a verdict is an answer
    tries = dict(db.execute("SELECT task_id, try_number FROM task_instance").fetchall())
    assert tries["audit"] == 1
    assert states["spark_app_stop"] == "success"  # the teardown ran, whatever the verdict
    assert db.execute("SELECT count(*) FROM asset_event").fetchone()[0] == 0


def test_stages_fall_back_to_spark_submit_when_the_runs_application_is_gone(
    tmp_path: Path,
) -> None:
    """The run's Spark application exits when idle (here at once, `RECON_SPARK_APP_IDLE_S`):
    the setup finds it gone before it answered, or the stages find it gone after; either way
    each stage says so and runs its own spark-submit, the run succeeds, the teardown too, and
    nothing of the application is left behind. (Switched off, `RECON_SPARK_APP_PER_RUN`, the
    setup starts none and returns none, the same fallback: tests/unit/test_app_lease.py;
    `tests/spark/test_app_server.py` has the application killed during a stage.)"""
    setting = {"RECON_SPARK_APP_IDLE_S": "0.01"}
    write_canal_dump(tmp_path / "raw", "af", START, 1, seed=5)
    cfg = write_canal_pipeline(
        tmp_path / "pipelines", "af", tmp_path / "raw", tmp_path / "wh", START
    )
    env = dict(airflow_env(tmp_path / "airflow", tmp_path / "pipelines"), **setting)
    migrate(env)
    log = tmp_path / "dag.log"
    assert dags_test(env, "recon_af", format_hour(H0), log=log) == "success", log.read_text()[
        -3000:
    ]
    text = log.read_text()
    gone = text.count("the run's Spark application is gone: spark-submit instead")
    not_started = "the run's Spark application did not start" in text
    assert (gone, not_started) in ((3, False), (0, True)), (gone, not_started)
    if not_started:  # it idled out before the setup saw it listen: its output is shown
        assert "recon app: no request for 0 s, exiting" in text
    else:  # the setup saw it listen, then it idled out before the first stage
        assert "the run's Spark application serves its stages" in text
    folders = set(re.findall(r"(/\S+/recon-app-\w+)/", text))
    assert folders and not any(Path(p).exists() for p in folders), folders
    for stage in ("decode", "merge_publish", "audit"):
        assert f"::group::spark-submit {stage}" in text
    report = json.loads(
        (tmp_path / "wh" / "audit" / "af" / format_hour(H0) / "report.json").read_text()
    )
    assert report["verdict"] == "pass" and report["identity"]["balanced"]
    assert len(list(export_rows(load_config(cfg), "shop.orders"))) >= 3
    import sqlite3

    db = sqlite3.connect(tmp_path / "airflow" / "airflow.db")
    states = dict(db.execute("SELECT task_id, state FROM task_instance").fetchall())
    assert states["spark_app"] == states["spark_app_stop"] == "success"


_WARMED_THEN_FORKED = """
import os, sys
import httpx
from airflow.sdk.execution_time.supervisor import in_process_api_server
from recon.demo.dags_fork import _warm_execution_api

_warm_execution_api()
pid = os.fork()
if pid == 0:  # what a forked `dags test` does with the cached in-process API
    api = in_process_api_server()
    built = api.app._cadwyn_initialized  # routes inherited, not built again on first request
    client = httpx.Client(transport=api.transport, base_url="http://in-process.invalid./")
    reply = client.get("/health").json()
    print("child", built, reply, flush=True)
    os._exit(0 if built and reply == {"status": "healthy"} else 3)
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_the_dags_test_server_builds_the_execution_api_routes_once_for_its_forks(
    tmp_path: Path,
) -> None:
    """The fork server builds the in-process execution API's routes before it forks (they
    took ~3.6 s of the first task of every demo DAG run): a forked child finds them built and
    its requests are served, on its own event loop."""
    import subprocess
    import sys

    env = airflow_env(tmp_path / "airflow", tmp_path / "pipelines")
    migrate(env)
    r = subprocess.run(
        [sys.executable, "-c", _WARMED_THEN_FORKED], env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "child True {'status': 'healthy'}" in r.stdout


def test_recon_demo_forks_its_dags_tests_from_one_airflow_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`recon demo` runs its `airflow dags test`s forked from one interpreter that imported
    Airflow once (`recon.demo.dags_fork`), two at a time: each run is Airflow's own command
    line, with its own log and final state. With the `airflow` executable made unreachable,
    they still succeed, so they ran in the server; a failing run reports `failed`; once the
    server is closed, a run falls back to its own `airflow` process. The server imports
    Airflow while the database is migrated, as the demo starts it, and writes to the database
    only once told it is migrated (had it written before, it would have died on the missing
    tables, and the runs, with no `airflow` to fall back to, failed); told nothing, it ends
    when its input closes.

    As in the demo, a run takes the Spark application an earlier run left serving
    (`RECON_SPARK_APP_SHARED`): the two runs at once start one each, the third takes the first
    one freed, fails its audit in it and stops it; the run after the server, an `airflow`
    process of its own, takes the one left."""
    import shutil
    import tempfile

    from recon.appsocket import SHARED_VAR, stop_shared_apps

    for name, seed in (("fa", 5), ("fb", 6)):
        write_canal_dump(tmp_path / "raw", name, START, 1, seed=seed)
        write_canal_pipeline(tmp_path / "pipelines", name, tmp_path / "raw", tmp_path / "wh", START)
    _failing_pipeline(tmp_path, "fc")
    shared = tempfile.mkdtemp(prefix="recon-t-")  # short: a socket's path is at most 107 bytes
    env = airflow_env(tmp_path / "airflow", tmp_path / "pipelines")
    env[SHARED_VAR] = shared
    try:
        _forked_runs_share_applications(tmp_path, monkeypatch, env, shared)
    finally:
        stop_shared_apps(shared)
        shutil.rmtree(shared, ignore_errors=True)


def _app_of(log: Path) -> tuple[str, str]:
    """(how the run got its application, its folder) from the run's log."""
    text = log.read_text()
    how = re.findall(r"the run's Spark application serves its stages|the run takes the Spark "
                     r"application an earlier run left serving", text)  # fmt: skip
    folders = set(re.findall(r"\(log (/\S+)/spark\.log\)", text))
    assert len(how) == 1 and len(folders) == 1, (how, folders)
    return ("started" if "serves its stages" in how[0] else "taken"), folders.pop()


def _forked_runs_share_applications(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], shared: str
) -> None:
    from recon.appsocket import APP_INFO, LEASE, is_app_process
    from recon.demo import airflow_local
    from recon.demo.airflow_local import DagsTestServer

    unmigrated = DagsTestServer(env, after_migrate=True)
    assert unmigrated.configured()
    unmigrated.close()  # a failed migration: the demo closes it unannounced
    assert unmigrated.proc.returncode == 0 and not unmigrated.ready
    server = DagsTestServer(env, after_migrate=True)
    assert server.configured() and (tmp_path / "airflow" / "airflow.cfg").is_file()
    migrate(env)
    real_airflow = airflow_local._airflow
    monkeypatch.setattr(airflow_local, "_airflow", lambda: "/nonexistent/airflow")
    logs = {n: tmp_path / f"{n}.log" for n in ("fa", "fb", "fc")}
    server.migrated()
    with server:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as pool:
            states = dict(
                pool.map(
                    lambda n: (
                        n,
                        dags_test(env, f"recon_{n}", format_hour(H0), log=logs[n], server=server),
                    ),
                    ["fa", "fb", "fc"],
                )
            )
    assert states == {"fa": "success", "fb": "success", "fc": "failed"}, states
    for n in ("fa", "fb"):
        text = logs[n].read_text()
        assert f"DagRun Finished: dag_id=recon_{n}" in text
        assert "::group::merge_publish in the run's Spark application" in text
        report = json.loads(
            (tmp_path / "wh" / "audit" / n / format_hour(H0) / "report.json").read_text()
        )
        assert report["verdict"] == "pass" and report["identity"]["balanced"]
    assert "audit exited 3 in the run's Spark application" in logs["fc"].read_text()
    # two runs at once, an application each; the third took one freed, and stopped it
    (how_a, app_a), (how_b, app_b), (how_c, app_c) = (_app_of(logs[n]) for n in logs)
    assert (how_a, how_b, how_c) == ("started", "started", "taken") and app_a != app_b
    assert app_c in (app_a, app_b)
    left = app_b if app_c == app_a else app_a
    info = {a: json.loads((Path(a) / APP_INFO).read_text()) for a in (app_a, app_b)}
    assert not is_app_process(info[app_c]["pid"], info[app_c]["socket"])
    assert is_app_process(info[left]["pid"], info[left]["socket"])
    assert not list(Path(shared).glob(f"*/{LEASE}"))  # every run gave its application back
    assert server.proc.returncode == 0  # it ended when its input closed, its runs done
    # closed: the next run is its own `airflow` process (unreachable here: the error says so)
    with pytest.raises(Exception, match="nonexistent"):
        dags_test(env, "recon_fa", format_hour(H0), server=server)
    monkeypatch.setattr(airflow_local, "_airflow", real_airflow)
    again = tmp_path / "again.log"
    assert dags_test(env, "recon_fa", format_hour(H0), log=again, server=server) == "success"
    assert _app_of(again) == ("taken", left)  # an `airflow` process of its own takes it too
