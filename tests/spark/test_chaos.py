"""Chaos (issue 12): a pipeline over three hours of real dumps, run the way operations go wrong:
real `recon` processes killed (SIGKILL, driver and JVM) at every pause point of decode, merge
and publish, each retried with the same run id (Airflow's retry and clear), an hour run again
after later ones, a merge by hand while another holds the pipeline refused. The tables end
equal to a clean run's, and every hour's report balances."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from recon.cli import main
from recon.config import load_config
from recon.demo import sample
from recon.demo.demo import write_dump
from recon.faults import DECODE_POINTS, POINTS
from recon.hours import format_hour
from recon.merge.manifest import load_manifest
from recon.publish.export import export_rows
from tests.support.builders import write_pipeline

START = datetime(2026, 6, 1, 0, tzinfo=UTC)
HOURS = [START + timedelta(hours=i) for i in range(3)]
FMT = "debezium_json"
TABLE = "shop.orders"


def _pipeline(tmp: Path, name: str) -> Path:
    txns = sample.workload(START, 3, txns_per_hour=10, seed=5)
    recs = sample.to_records(sample.ENCODERS[FMT](txns), "t")
    if not (tmp / "raw").is_dir():
        write_dump(tmp / "raw", "t", recs, "jsonl", HOURS)
    return write_pipeline(
        tmp / f"{name}.yaml",
        name=name,
        format=FMT,
        raw=tmp / "raw",
        warehouse=tmp / f"wh_{name}",
        topics=["t"],
        start=START,
        buckets=4,
    )


ENV = {**os.environ, "RECON_SHUFFLE_PARTITIONS": "2", "RECON_SPARK_MASTER": "local[2]"}


def _recon(*args: str, pause_at: str | None = None, marker: Path | None = None) -> Any:
    env = dict(ENV)
    if pause_at:
        env.update(RECON_PAUSE_AT=pause_at, RECON_PAUSE_FILE=str(marker))
    return subprocess.Popen(
        [sys.executable, "-m", "recon.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _paused(args: list[str], point: str, tmp: Path) -> subprocess.Popen[bytes]:
    """A real process stopped at `point` (it holds whatever it holds there)."""
    marker = tmp / f"paused-{time.monotonic_ns()}"
    proc = _recon(*args, pause_at=point, marker=marker)
    deadline = time.time() + 300
    while not marker.exists():
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"{args} ended before {point}: {err[-2000:]}")
        if time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"{args} never reached {point}")
        time.sleep(0.2)
    return proc


def _kill(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _ok(*args: str) -> None:
    """A retry that runs to the end (in this process: the test's Spark session)."""
    assert main(list(args)) == 0, args


def _stage(stage: str, cfg: Path, h: datetime, run_id: str) -> list[str]:
    return [stage, "--pipeline", str(cfg), "--hour", format_hour(h), "--run-id", run_id]


def test_kills_retries_reruns_and_a_refused_hand_merge_end_like_a_clean_run(
    spark, tmp_path: Path
) -> None:
    clean = _pipeline(tmp_path, "clean")
    assert (
        main(
            [
                "run",
                "--pipeline",
                str(clean),
                "--from",
                format_hour(HOURS[0]),
                "--to",
                format_hour(HOURS[2]),
            ]
        )
        == 0
    )
    expected = list(export_rows(load_config(clean), TABLE))
    assert len(expected) > 5

    cfg_file = _pipeline(tmp_path, "chaos")
    cfg = load_config(cfg_file)
    # where each hour's processes are killed: every pause point of decode, merge and publish
    decode_kills = {0: [DECODE_POINTS[0]], 1: [], 2: [DECODE_POINTS[1]]}
    merge_kills = {0: [POINTS[0]], 1: [POINTS[1]], 2: [POINTS[2]]}
    for i, h in enumerate(HOURS):
        rid = f"scheduled__{format_hour(h)}"
        for point in decode_kills[i]:  # killed, then retried with the same run id
            _kill(_paused(_stage("decode", cfg_file, h, rid), point, tmp_path))
            assert not cfg.layout.decode_counters(h).is_file(), point  # not "decoded"
        _ok(*_stage("decode", cfg_file, h, rid))
        for point in merge_kills[i]:
            _kill(_paused(_stage("merge", cfg_file, h, rid), point, tmp_path))
        if i == 1:  # a merge by hand while a retry holds the pipeline: refused, one line
            held = _paused(_stage("merge", cfg_file, h, rid), POINTS[0], tmp_path)
            hand = _recon(*_stage("merge", cfg_file, h, "manual"))
            _, err = hand.communicate(timeout=600)
            assert hand.returncode == 2 and "is being written by" in err.decode(), err.decode()
            assert "Traceback" not in err.decode()
            _kill(held)
        _ok(*_stage("merge", cfg_file, h, rid))
        _ok("audit", "--pipeline", str(cfg_file), "--hour", format_hour(h))
        if i == 1:  # hour 0 run again after hour 1 (a cleared run), killed once per stage
            again = f"scheduled__{format_hour(HOURS[0])}"
            _kill(_paused(_stage("decode", cfg_file, HOURS[0], again), DECODE_POINTS[1], tmp_path))
            assert not cfg.layout.decode_counters(HOURS[0]).is_file()
            _ok(*_stage("decode", cfg_file, HOURS[0], again))
            _kill(_paused(_stage("merge", cfg_file, HOURS[0], again), POINTS[1], tmp_path))
            _ok(*_stage("merge", cfg_file, HOURS[0], again))
            _ok("audit", "--pipeline", str(cfg_file), "--hour", format_hour(HOURS[0]))

    assert list(export_rows(cfg, TABLE)) == expected
    assert load_manifest(cfg)["hours"] == [format_hour(h) for h in HOURS]
    for h in HOURS:
        report = json.loads(cfg.layout.report(h).read_text())
        assert report["identity"]["balanced"] is True, (h, report["identity"])
        kinds = {f["kind"] for f in report["findings"]}
        assert not kinds & {"balance", "hour_order", "offset_reset", "quarantined"}, (h, kinds)
    # no table holds a row twice: the data files of the current versions hold exactly the rows
    from recon.publish.iceberg import load_table

    assert load_table(cfg, TABLE).scan().to_arrow().num_rows == len(expected)
