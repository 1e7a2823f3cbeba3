"""One Spark application per DAG run (`recon.ops.app_server`, `recon/jobs/app.py`), driven as the
Airflow tasks drive it: a real spark-submit of the application, stages sent over its socket.
A stage's exit code and output come back to the caller; a user error is its one line; killed
mid-stage, the caller is told so and, the application gone, falls back (`request` returns None)
to running the stage itself, which converges to the uninterrupted result."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from recon.appsocket import END_MARK, AppGone, reachable, request, wait_ready
from recon.layout import APP_JOB
from recon.merge.stage import merge_hour
from recon.publish.export import export_rows
from tests.support.builders import pipeline
from tests.support.merge import H0, HOUR0, HOUR1, hour, write_hour

TABLES = {"s.a": {"primary_key": ["id"]}}


def _start_app(tmp: Path, **env: str) -> tuple[subprocess.Popen[bytes], str, str]:
    sock, log = str(tmp / "app.sock"), str(tmp / "app.log")
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            ["spark-submit", "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2",
             str(APP_JOB), "--socket", sock],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, **env},
        )  # fmt: skip
    assert wait_ready(sock, lambda: proc.poll() is None, 300), Path(log).read_text()[-3000:]
    return proc, sock, log


def _merge_args(cfg: Any, h: str, summary: Path) -> list[str]:
    return ["merge", "--pipeline", str(cfg.source_file), "--from", h, "--run-id", "r1",
            "--summary-file", str(summary)]  # fmt: skip


def test_stages_run_in_the_application_and_report_like_spark_submit(tmp_path: Path) -> None:
    cfg = pipeline(tmp_path / "p", TABLES)
    write_hour(cfg, H0, HOUR0)
    proc, sock, log = _start_app(tmp_path)
    try:
        # a client that connects and hangs is dropped after READ_S, not waited for
        hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        hung.connect(sock)
        lines: list[str] = []
        summary = tmp_path / "summary.json"
        args = _merge_args(cfg, "2026-01-01T00", summary)
        rc = request(sock, {"argv": args}, log, lines.append, timeout_s=120)  # not stuck
        assert rc == 0, "\n".join(lines[-40:])
        assert any("merge: hour 1 of 1 (2026-01-01T00) done" in x for x in lines), lines
        assert '"stage": "merge"' in summary.read_text()
        # everything the driver printed for the stage, to its closing line (which Spark's JVM
        # may still be copying to the log when the answer comes)
        assert f"{END_MARK}, exit code 0" in lines, lines[-5:]
        hung.close()
        assert len(list(export_rows(cfg, "s.a"))) == len(HOUR0)
        # a user error: exit 2 and its one line, and the application serves on
        lines.clear()
        bad = ["merge", "--pipeline", str(tmp_path / "missing.yaml"), "--from", "2026-01-01T00"]
        assert request(sock, {"argv": bad}, log, lines.append) == 2
        errors = [x for x in lines if x.startswith("recon/jobs/stage.py:")]
        assert len(errors) == 1 and "missing.yaml" in errors[0], lines
        assert not any("Traceback" in x for x in lines), lines
        assert f"{END_MARK}, exit code 2" in lines, lines[-5:]
        assert request(sock, {"stop": True}) == 0
        assert proc.wait(timeout=120) == 0
        assert not reachable(sock)
        assert request(sock, {"argv": bad}) is None  # gone: the caller runs spark-submit
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_an_application_killed_mid_stage_fails_the_stage_and_the_rerun_converges(
    spark, tmp_path: Path
) -> None:
    ref = pipeline(tmp_path / "ref", TABLES)
    cfg = pipeline(tmp_path / "run", TABLES)
    for c in (ref, cfg):
        write_hour(c, H0, HOUR0)
        write_hour(c, hour(1), HOUR1)
        merge_hour(spark, c, H0, buckets=4)
    merge_hour(spark, ref, hour(1), buckets=4)
    expected = list(export_rows(ref, "s.a"))
    hour0 = list(export_rows(cfg, "s.a"))
    marker = tmp_path / "paused"
    proc, sock, log = _start_app(
        tmp_path, RECON_PAUSE_AT="merge:state-written", RECON_PAUSE_FILE=str(marker)
    )
    outcome: dict[str, Any] = {}

    def send() -> None:
        try:
            outcome["rc"] = request(
                sock, {"argv": _merge_args(cfg, "2026-01-01T01", tmp_path / "s")}
            )
        except AppGone as err:
            outcome["gone"] = str(err)

    t = threading.Thread(target=send)
    t.start()
    try:
        deadline = time.time() + 300
        while not marker.exists():
            assert proc.poll() is None and time.time() < deadline, Path(log).read_text()[-3000:]
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, mid-stage
        proc.wait()
    t.join(timeout=60)
    assert "gone" in outcome and "rc" not in outcome, outcome
    assert list(export_rows(cfg, "s.a")) == hour0  # nothing half-published
    assert request(sock, {"stop": True}) is None  # unreachable: the retry runs spark-submit
    merge_hour(spark, cfg, hour(1), buckets=4)  # the retry, under spark-submit
    assert list(export_rows(cfg, "s.a")) == expected
