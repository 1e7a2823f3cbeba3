"""Alternate fresh `recon run`s of one benchmark hour between code versions: each run's wall
time and its Spark jobs' wall and CPU seconds (Spark's event log), and per version the medians.

Why this way: a change to the merge's per-event expressions measured in one warm JVM, run after
run, often saves little or nothing in a fresh `recon run`, which runs each job once on code the
JVM has not compiled yet (session 48's measurements in benchmarks/HISTORY.md); and one run's time swings
by a third on this machine. So each version runs as the user runs it, a fresh process on the
same hour, the versions in turns (a slow minute falls on all of them), the order turned each
round (A, B, then B, A: `round_order`), and CPU time is counted beside wall time: the whole
run's (its processes', the decoders' Python included) and each job's (its tasks' JVM threads:
a Python task's own work is not in it).

A version is a git revision (checked out once into `<work>/trees/`, with the protobuf code
generated and the C modules built there, the setup's `.venv` shared) or a directory holding a
checkout (a working tree, changed by hand).

The checkouts are kept for the next comparison (building one takes a while);
`--clean` removes them, and git's records of them.

Run: .venv/bin/python -m benchmarks.ab [--format F] [--messages 500k] [--shape S] [--rounds 3]
     [--work DIR]
     VERSION [VERSION ...]
     .venv/bin/python -m benchmarks.ab --clean [--work DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from benchmarks.formats import KINDS
from benchmarks.gen import iter_sizes
from benchmarks.run import (
    HOUR,
    HOUR_SHAPES,
    ROOT,
    TreeSampler,
    _env,
    make_hour,
    round_order,
    sampled,
)

JobTimes = dict[str, tuple[int, float, float]]
"""Job description or call site -> (jobs, wall seconds, CPU seconds of their tasks)."""


def job_times(event_log: Path) -> JobTimes:
    """Per job description or call site of an uncompressed Spark event log: its jobs, their
    wall seconds (submission to end), and their tasks' CPU seconds (`Executor CPU Time`, of
    every task that ended, retries included). A checkout's path is cut from call sites, so
    two versions' jobs compare by name."""
    site_of_job: dict[int, str] = {}
    job_of_stage: dict[int, int] = {}
    started: dict[int, float] = {}
    wall: dict[str, float] = collections.defaultdict(float)
    cpu: dict[str, float] = collections.defaultdict(float)
    jobs: collections.Counter[str] = collections.Counter()
    for line in event_log.read_text().splitlines():
        e = json.loads(line)
        kind = e["Event"]
        if kind == "SparkListenerJobStart":
            props = e.get("Properties") or {}
            site = props.get("spark.job.description") or props.get("callSite.short", "?")
            site_of_job[e["Job ID"]] = _without_checkout(site)
            started[e["Job ID"]] = e["Submission Time"]
            job_of_stage.update({s: e["Job ID"] for s in e["Stage IDs"]})
        elif kind == "SparkListenerJobEnd" and e["Job ID"] in started:
            site = site_of_job[e["Job ID"]]
            jobs[site] += 1
            wall[site] += (e["Completion Time"] - started[e["Job ID"]]) / 1000
        elif kind == "SparkListenerTaskEnd" and e.get("Stage ID") in job_of_stage:
            ns = (e.get("Task Metrics") or {}).get("Executor CPU Time", 0)
            cpu[site_of_job[job_of_stage[e["Stage ID"]]]] += ns / 1e9
    return {s: (jobs[s], round(wall[s], 3), round(cpu[s], 3)) for s in jobs}


def _without_checkout(site: str) -> str:
    """A call site (`collect at /some/checkout/recon/merge/state.py:252`) with its file named
    from the package down (`recon/merge/state.py:252`)."""
    at = site.find(" at ")
    if at < 0:
        return site
    where = site[at + 4 :]
    for top in ("recon/", "jobs/", "benchmarks/"):
        i = where.find("/" + top)
        if i >= 0:
            return site[: at + 4] + where[i + 1 :]
    return site


def medians(runs: list[dict[str, Any]], floor: float = 0.3) -> dict[str, Any]:
    """A version's runs (`wall`, `process_cpu`, `jvm_cpu`, `jobs`: `JobTimes`) as medians: the
    wall time, the run's CPU time, its JVM's, its jobs' tasks', and per job whose median wall
    time is at least `floor` seconds, its wall and CPU seconds; slowest job first. A job
    missing from a run counts 0 there."""
    sites = {s for r in runs for s in r["jobs"]}
    per = {
        s: (
            statistics.median(r["jobs"].get(s, (0, 0.0, 0.0))[1] for r in runs),
            statistics.median(r["jobs"].get(s, (0, 0.0, 0.0))[2] for r in runs),
        )
        for s in sites
    }
    kept = sorted(((s, w, c) for s, (w, c) in per.items() if w >= floor), key=lambda x: -x[1])
    return {
        "wall": statistics.median(r["wall"] for r in runs),
        "process_cpu": statistics.median(r.get("process_cpu", 0.0) for r in runs),
        "jvm_cpu": statistics.median(r.get("jvm_cpu", 0.0) for r in runs),
        "cpu": statistics.median(sum(c for _, _, c in r["jobs"].values()) for r in runs),
        "jobs": [{"job": s, "wall": round(w, 2), "cpu": round(c, 2)} for s, w, c in kept],
    }


def checkout(version: str, trees: Path) -> Path:
    """The directory a version runs from: a directory as it is, or a git revision checked out
    into `trees` (once), with its protobuf code generated and C modules built."""
    given = Path(version)
    if given.is_dir():
        return given.resolve()
    rev = _git("rev-parse", "--verify", "--quiet", f"{version}^{{commit}}")
    if not rev:
        sys.exit(f"ab: {version!r} is neither a directory nor a git revision of {ROOT}")
    tree = trees / rev[:12]
    if not (tree / ".venv").exists():
        shutil.rmtree(tree, ignore_errors=True)
        _git("worktree", "add", "--detach", "--force", str(tree), rev)
        (tree / ".venv").symlink_to(ROOT / ".venv")
        # this checkout's script: a revision from before it has none of its own
        _run(["bash", str(ROOT / "scripts" / "gen-proto.sh")], tree)
        if (tree / "scripts" / "build-native.sh").exists():
            _run(["bash", "scripts/build-native.sh"], tree)
    return tree


def clean(trees: Path) -> int:
    """Remove the checkouts under `trees` and git's records of them (`git worktree prune`);
    how many there were. The shared `.venv` in each is a link: removed, never followed."""
    gone = 0
    for tree in sorted(p for p in trees.iterdir() if p.is_dir()) if trees.is_dir() else []:
        (tree / ".venv").unlink(missing_ok=True)
        shutil.rmtree(tree)
        gone += 1
    _git("worktree", "prune")
    return gone


def _git(*args: str) -> str:
    r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if r.returncode and args[0] != "rev-parse":
        sys.exit(f"ab: git {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout.strip()


def _run(cmd: list[str], cwd: Path) -> None:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"ab: {' '.join(cmd[:3])} in {cwd} failed:\n{r.stdout[-1000:]}{r.stderr[-2000:]}")


def one_run(tree: Path, work: Path) -> dict[str, Any]:
    """A fresh `recon run` of the hour in `work` with the code in `tree`, from an empty
    warehouse: its wall time and `job_times`."""
    shutil.rmtree(work / "wh", ignore_errors=True)
    log_dir = work / "eventlog"
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir()
    env = _env()
    env["PYTHONPATH"] = f"{tree}:{os.environ.get('PYTHONPATH', '')}"
    env["RECON_SPARK_CONF"] = json.dumps(
        {"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(log_dir), "spark.eventLog.compress": "false"}
    )  # fmt: skip
    cmd = [sys.executable, "-m", "recon.cli", "run", "--pipeline", str(work / "pipeline.yaml"), "--from", HOUR]  # fmt: skip
    wall, _, sampler = sampled(cmd, env, TreeCpu, f"ab: recon run with {tree}", cwd=tree)
    jobs = job_times(next(log_dir.rglob("events*")))
    return {
        "wall": round(wall, 2),
        "process_cpu": round(sampler.seconds(), 2),
        "jvm_cpu": round(sampler.seconds("jvm"), 2),
        "jobs": jobs,
    }


class TreeCpu(TreeSampler):
    """The CPU time (user and system) of a process tree: each process's, as last read (every
    0.1 s while it lives), summed: the driver, the JVM and Spark's Python workers (the
    decoders' Python, which the JVM's task metrics do not count). A process that lived less
    than a sample apart, or its last 0.1 s, is missed."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.seen: dict[tuple[int, float], tuple[str, float]] = {}
        """(pid, start) -> (process kind, its CPU seconds as last read)."""

    def run(self) -> None:
        while not self.done.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                procs = []
            for p in procs:
                try:
                    t = p.cpu_times()
                    kind = "jvm" if "java" in p.name() else "python"
                    self.seen[(p.pid, p.create_time())] = (kind, t.user + t.system)
                except psutil.Error:
                    pass
            self.done.wait(0.1)

    def seconds(self, kind: str | None = None) -> float:
        """CPU seconds of the tree's processes (`kind`: of its "jvm" or "python" ones)."""
        return sum(c for k, c in self.seen.values() if kind in (None, k))


def main() -> None:
    ap = argparse.ArgumentParser(description="alternate fresh recon runs between code versions")
    ap.add_argument("versions", nargs="*", help="git revisions or checkout directories")
    ap.add_argument("--format", default="dataworks_json", choices=sorted(KINDS))
    ap.add_argument("--messages", default="500k")
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--shape", default="hot", choices=HOUR_SHAPES)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default=str(ROOT / "var" / "ab"))
    ap.add_argument("--clean", action="store_true", help="remove the checked-out revisions")
    args = ap.parse_args()
    work = Path(args.work).resolve()
    trees = work / "trees"
    if args.clean:
        print(f"ab: removed {clean(trees)} checkout(s) under {trees}")
        if not args.versions:
            return
    elif not args.versions:
        ap.error("name at least one VERSION (a git revision or a checkout directory), or --clean")
    trees.mkdir(parents=True, exist_ok=True)
    dirs = {v: checkout(v, trees) for v in args.versions}
    hour = work / "hour"
    ns = argparse.Namespace(
        keys=args.keys, delete_share=0.1, partitions=2, seed=1, file_per_partition=False
    )
    counts = make_hour(hour, args.format, next(iter_sizes(args.messages)), ns, args.shape)
    print(
        f"ab: {args.format} {args.shape}, {counts['messages']:,} messages, {args.rounds} round(s)"
    )
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in args.versions}
    for n in range(args.rounds):
        for v in round_order(args.versions, n):
            got = one_run(dirs[v], hour)
            runs[v].append(got)
            cpu = sum(c for _, _, c in got["jobs"].values())
            print(f"  {v:<24} {got['wall']:6.1f} s  CPU {got['process_cpu']:6.1f} s (JVM {got['jvm_cpu']:5.1f} s, its jobs' tasks {cpu:5.1f} s)", flush=True)  # fmt: skip
    summary = {v: medians(r) for v, r in runs.items()}
    (work / "ab.json").write_text(json.dumps({"format": args.format, "shape": args.shape, "messages": counts["messages"], "runs": runs, "medians": summary}, indent=1))  # fmt: skip
    for v, m in summary.items():
        print(f"\n{v}: median {m['wall']:.1f} s, CPU {m['process_cpu']:.1f} s (JVM {m['jvm_cpu']:.1f} s, its jobs' tasks {m['cpu']:.1f} s)")  # fmt: skip
        for j in m["jobs"]:
            print(f"  {j['wall']:6.2f} s wall  {j['cpu']:6.2f} s CPU  {j['job']}")
    print(f"\nab: {work / 'ab.json'}")


if __name__ == "__main__":
    main()
