"""Issue 12 item 2: one writer per pipeline. A hand-run command beside a running writer stops
with one line naming who holds the pipeline; a writer that lost a race on the manifest fails
loudly instead of overwriting the other's commit (both used to read, then the last one won)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from recon.errors import ManifestError, PipelineBusy
from recon.merge.manifest import empty_manifest, load_manifest, save_manifest
from recon.ops.lock import pipeline_lock
from tests.support.builders import pipeline

HOLD = """
import sys, time
from recon.config import load_config
from recon.ops.lock import pipeline_lock
with pipeline_lock(load_config(sys.argv[1]), "recon merge (a test)"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_writer_is_refused_in_one_line_and_waits_when_asked(tmp_path: Path) -> None:
    cfg = pipeline(tmp_path, {"s.a": {}})
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(cfg.source_file)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        r = subprocess.run(
            [sys.executable, "-m", "recon.cli", "rollback", "--pipeline", str(cfg.source_file),
             "--to-hour", "2026-01-01T00"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "is being written by `recon merge (a test)` (pid" in r.stderr
        assert "recon rollback was not started" in r.stderr
        with pytest.raises(PipelineBusy), pipeline_lock(cfg, "x", wait_s=1):
            pass
    finally:
        holder.kill()
        holder.wait()
    with pipeline_lock(cfg, "x", wait_s=30):  # the holder is gone: the lock is free
        assert (cfg.layout.state / "writer.json").is_file()
    assert not (cfg.layout.state / "writer.json").exists()


def test_the_manifest_commit_is_a_compare_and_swap(tmp_path: Path) -> None:
    cfg = pipeline(tmp_path, {"s.a": {}})
    mine = load_manifest(cfg)  # version 0
    save_manifest(cfg, empty_manifest() | {"version": 1}, expected=0)  # another writer commits
    with pytest.raises(ManifestError, match="changed while this command ran .*0 -> 1"):
        save_manifest(cfg, mine | {"version": 1, "hours": ["x"]}, expected=mine["version"])
    assert load_manifest(cfg)["hours"] == []  # the other commit stands
