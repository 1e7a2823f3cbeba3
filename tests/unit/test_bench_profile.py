"""`benchmarks.profile`'s JVM side: JFR's executor samples put in the Spark stage running when
each was taken, and the Java methods ranked per stage."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.profile import java_by_stage, stage_windows

T0 = datetime(2026, 3, 2, 10, tzinfo=UTC).timestamp() * 1000


def _event_log(tmp_path: Path) -> Path:
    """Two jobs: job 0 (described) runs stage 0 from T0 to T0+1 s; job 1 (a call site only)
    runs stages 1 and 2, the second from T0+2 s to T0+3 s (stage 1 skipped: never completed)."""
    lines = [
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Stage IDs": [0],
         "Properties": {"spark.job.description": "decode: the decoders"}},
        {"Event": "SparkListenerStageCompleted",
         "Stage Info": {"Stage ID": 0, "Submission Time": T0, "Completion Time": T0 + 1000}},
        {"Event": "SparkListenerJobStart", "Job ID": 1, "Stage IDs": [1, 2],
         "Properties": {"callSite.short": "collect at state.py:245"}},
        {"Event": "SparkListenerStageCompleted",
         "Stage Info": {"Stage ID": 2, "Submission Time": T0 + 2000, "Completion Time": T0 + 3000}},
    ]  # fmt: skip
    path = tmp_path / "events_1"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def _sample(ms: float, thread: str, *methods: str) -> dict[str, Any]:
    """A `jfr print --json` execution sample at T0 + `ms`, its stack `methods` (leaf first)."""
    at = datetime.fromtimestamp((T0 + ms) / 1000, UTC).isoformat().replace("+00:00", "Z")
    frames = [
        {"method": {"type": {"name": m.rsplit(".", 1)[0]}, "name": m.rsplit(".", 1)[1]}}
        for m in methods
    ]
    return {
        "type": "jdk.ExecutionSample",
        "values": {"startTime": at, "sampledThread": {"javaName": thread},
                   "stackTrace": {"frames": frames}},
    }  # fmt: skip


def test_samples_go_to_the_stage_running_then(tmp_path: Path) -> None:
    stages = stage_windows(_event_log(tmp_path))
    assert [(s, job) for _, _, s, job in stages] == [
        (0, "decode: the decoders"),
        (2, "collect at state.py:245"),
    ]
    worker = "Executor task launch worker-0"
    samples = [
        _sample(100, worker, "org/x/Sorter.compare", "org/x/Agg.next"),
        _sample(200, worker, "org/x/Sorter.compare", "org/x/Agg.next"),
        _sample(900, worker, "org/x/Reader.read", "org/x/Agg.next"),
        _sample(2500, worker, "org/x/Reader.read"),
        _sample(1500, worker, "org/x/Between.gap"),  # no stage ran then
        _sample(100, "main", "org/x/Driver.plan"),  # the driver: not an executor thread
        {"values": {"startTime": "2026-03-02T10:00:00Z", "stackTrace": None,
                    "sampledThread": {"javaName": worker}}},  # no stack: not counted
    ]  # fmt: skip
    got = java_by_stage(samples, stages)
    assert [(g["stage"], g["job"], g["samples"]) for g in got] == [
        (0, "decode: the decoders", 3),
        (-1, "between stages", 1),
        (2, "collect at state.py:245", 1),
    ]
    assert got[0]["methods"] == [("Agg.next", 3), ("Sorter.compare", 2), ("Reader.read", 1)]
    assert got[2]["methods"] == [("Reader.read", 1)]


def test_a_method_twice_on_one_stack_counts_once(tmp_path: Path) -> None:
    stages = stage_windows(_event_log(tmp_path))
    worker = "Executor task launch worker-1"
    samples = [_sample(10, worker, "a/TimSort.mergeAt", "a/TimSort.mergeAt", "a/Sorter.sort")]
    got = java_by_stage(samples, stages)
    assert dict(got[0]["methods"]) == {"TimSort.mergeAt": 1, "Sorter.sort": 1}
