"""`benchmarks.ab`'s reading of Spark's event log: each job's wall time and its tasks' CPU time,
named so two checkouts' jobs compare; and the medians of a version's runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks.run as bench_run
from benchmarks.ab import _without_checkout, job_times, medians
from benchmarks.run import round_order, run_paths


def _event_log(tmp_path: Path) -> Path:
    """Job 0 (described) runs stage 0 in 1.5 s, two tasks of 0.5 and 0.25 CPU-seconds; job 1
    (a call site in a checkout) runs stages 1 and 2 in 2 s, a task in each (one of them a
    retry: counted); job 2 starts and never ends (not counted); a task of a stage no job
    named is not counted."""
    lines = [
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Stage IDs": [0], "Submission Time": 1000,
         "Properties": {"spark.job.description": "decode: the decoders"}},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 0, "Task Metrics": {"Executor CPU Time": 500_000_000}},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 0, "Task Metrics": {"Executor CPU Time": 250_000_000}},
        {"Event": "SparkListenerJobEnd", "Job ID": 0, "Completion Time": 2500},
        {"Event": "SparkListenerJobStart", "Job ID": 1, "Stage IDs": [1, 2], "Submission Time": 3000,
         "Properties": {"callSite.short": "collect at /tmp/trees/abc/recon/merge/state.py:252"}},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 1, "Task Metrics": {"Executor CPU Time": 1_000_000_000}},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 2, "Task Metrics": {"Executor CPU Time": 2_000_000_000}},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 2, "Task Metrics": None},
        {"Event": "SparkListenerJobEnd", "Job ID": 1, "Completion Time": 5000},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 9, "Task Metrics": {"Executor CPU Time": 7}},
        {"Event": "SparkListenerJobStart", "Job ID": 2, "Stage IDs": [3], "Submission Time": 6000,
         "Properties": {"callSite.short": "count at x.py:1"}},
    ]  # fmt: skip
    path = tmp_path / "events_1"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_each_jobs_wall_and_cpu_seconds_by_its_name(tmp_path: Path) -> None:
    assert job_times(_event_log(tmp_path)) == {
        "decode: the decoders": (1, 1.5, 0.75),
        "collect at recon/merge/state.py:252": (1, 2.0, 3.0),
    }


def test_call_sites_of_two_checkouts_compare() -> None:
    a = _without_checkout("collect at /work/main/recon/merge/state.py:252")
    b = _without_checkout("collect at /tmp/x/trees/0123/recon/merge/state.py:252")
    assert a == b == "collect at recon/merge/state.py:252"
    assert _without_checkout("merge: the new state") == "merge: the new state"
    assert _without_checkout("count at <stdin>:3") == "count at <stdin>:3"


def test_a_versions_runs_count_as_medians() -> None:
    def run(wall: float, decode: float, fold: float) -> dict:
        jobs = {"decode": (1, decode, decode * 2), "fold": (1, fold, 1.0)}
        return {"wall": wall, "process_cpu": wall * 2, "jvm_cpu": wall, "jobs": jobs}

    got = medians([run(20.0, 3.0, 0.2), run(25.0, 2.0, 0.4), run(21.0, 4.0, 0.5)])
    assert got["wall"] == 21.0
    assert (got["process_cpu"], got["jvm_cpu"]) == (42.0, 21.0)
    assert got["cpu"] == 7.0  # the runs' CPU: 7, 5, 9
    # the fold's median wall time (0.4 s) reaches the floor; slowest first
    assert got["jobs"] == [
        {"job": "decode", "wall": 3.0, "cpu": 6.0},
        {"job": "fold", "wall": 0.4, "cpu": 1.0},
    ]
    # a job missing from a run counts 0 there; below the floor it is left out
    two = medians([run(1.0, 1.0, 0.2), {"wall": 2.0, "jobs": {"decode": (1, 3.0, 1.0)}}])
    assert two["jobs"] == [{"job": "decode", "wall": 2.0, "cpu": 1.5}]


def test_each_version_runs_in_each_place_as_the_rounds_turn() -> None:
    """A version (or a bench path) run first in every round is measured with the order
    (`round_order`)."""
    for versions in (["a", "b"], ["a", "b", "c"], ["x"]):
        rounds = [round_order(versions, n) for n in range(2 * len(versions))]
        assert rounds[0] == versions
        for order in rounds:
            assert sorted(order) == sorted(versions)
        for place in range(len(versions)):
            firsts = [order[place] for order in rounds]
            assert sorted(firsts) == sorted(versions * 2), (place, rounds)
    assert round_order([], 3) == []


def test_the_benchs_paths_run_in_turned_orders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make bench` runs its paths as `round_order` turns them, and takes each path's median."""
    ran: list[str] = []

    def timed(cmd: list[str], env: dict[str, str]) -> dict:
        path = cmd[3] if cmd[2] == "benchmarks.paths" else "recon"
        ran.append(path)
        return {"seconds": float(len(ran)), "stdout": "rows 7\n", "peak": {"total_mb": 1.0}}

    monkeypatch.setattr(bench_run, "timed", timed)
    monkeypatch.setattr(bench_run, "recon_rows", lambda work: 7)
    got = run_paths(tmp_path, "dataworks_json", ("copy", "naive", "recon"), repeat=3)
    assert ran == ["copy", "naive", "recon", "naive", "recon", "copy", "recon", "copy", "naive"]
    assert got["copy"]["seconds"] == 6.0 and got["recon"]["seconds"] == 5.0
