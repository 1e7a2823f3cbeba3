"""Killing a real `recon merge` process at a named fault point (`recon.faults`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def kill_at(
    cfg_file: Path, point: str, tmp: Path, hour: str = "2026-01-01T01", run_id: str | None = None
) -> None:
    marker = tmp / f"paused-{point.replace(':', '_')}"
    env = {
        **os.environ,
        "RECON_PAUSE_AT": point,
        "RECON_PAUSE_FILE": str(marker),
        "RECON_SHUFFLE_PARTITIONS": "2",
        "RECON_SPARK_MASTER": "local[2]",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "recon.cli",
            "merge",
            "--pipeline",
            str(cfg_file),
            "--hour",
            hour,
            *(["--run-id", run_id] if run_id else []),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"run ended before {point}: {proc.stderr.read().decode()[-2000:]}")
        if time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"run never reached {point}")
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, mid-flight
    proc.wait()
