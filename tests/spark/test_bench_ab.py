"""`python -m benchmarks.ab` end to end: a git revision checked out beside this checkout (its
protobuf code generated, its C modules built) and this checkout itself, each running a fresh
`recon run` of one small hour; both runs' jobs named alike, with wall and CPU times; then
`--clean` removes the checkout and git's record of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_two_versions_run_the_same_hour_and_their_jobs_compare(tmp_path: Path) -> None:
    work = tmp_path / "ab"
    cmd = [sys.executable, "-m", "benchmarks.ab", "--messages", "2k", "--rounds", "1",
           "--work", str(work), "HEAD", str(ROOT)]  # fmt: skip
    try:
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
        got = json.loads((work / "ab.json").read_text())
    finally:
        clean = [sys.executable, "-m", "benchmarks.ab", "--clean", "--work", str(work)]
        gone = subprocess.run(clean, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "removed 1 checkout(s)" in gone.stdout, gone.stdout + gone.stderr
    assert not any((work / "trees").iterdir())
    trees = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True)
    assert str(work) not in trees.stdout  # git's record of it pruned too
    assert got["messages"] == 2000
    runs = got["runs"]
    assert list(runs) == ["HEAD", str(ROOT)]
    for (run,) in runs.values():
        assert run["wall"] > 0
        # the run's processes (driver, JVM, workers) used at least the CPU its tasks did
        tasks = sum(cpu for *_, cpu in run["jobs"].values())
        assert run["process_cpu"] > run["jvm_cpu"] >= tasks > 0
        sites = set(run["jobs"])
        assert "decode: the decoders (a task per core, or per staging file)" in sites
        assert any(s.startswith("collect at recon/merge/") for s in sites), sites
        assert all(cpu >= 0 and wall > 0 for _, wall, cpu in run["jobs"].values())
    # the checkout's path is cut from call sites: the same jobs by the same names
    assert set(runs["HEAD"][0]["jobs"]) == set(runs[str(ROOT)][0]["jobs"])
    assert "median" in r.stdout and "its jobs' tasks" in r.stdout
