"""Where one `recon run` hour spends its time: generates an hour (as `make bench` does), runs
`recon run` under py-spy (every process: the driver program and Spark's Python workers) with
Spark's event log on, then prints the Spark jobs by description or call site (count, seconds)
and the Python functions with the most samples, per process. benchmarks/HISTORY.md quotes runs' jobs.
The JVM, which py-spy cannot see into, is sampled by Java Flight Recorder (JFR, in the JDK): its
executor threads' samples are put in the Spark stage running when each was taken, and the Java
methods with the most samples are printed per stage (`--no-jfr`: without; skipped, saying so,
where the JDK has no `jfr` tool).

Run: .venv/bin/python -m benchmarks.profile [--format dataworks_json] [--messages 500k]
     [--shape distinct]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.formats import KINDS
from benchmarks.gen import iter_sizes
from benchmarks.run import HOUR, HOUR_SHAPES, ROOT, _env, make_hour


def jobs_by_call_site(event_log: Path) -> list[tuple[str, int, float]]:
    """(job description or call site, jobs, seconds) from an uncompressed Spark event log,
    slowest first."""
    start: dict[int, tuple[int, str]] = {}
    by: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for line in event_log.read_text().splitlines():
        e = json.loads(line)
        if e["Event"] == "SparkListenerJobStart":
            props = e.get("Properties", {})
            site = props.get("spark.job.description") or props.get("callSite.short", "?")
            start[e["Job ID"]] = (e["Submission Time"], site.replace(str(ROOT) + "/", ""))
        elif e["Event"] == "SparkListenerJobEnd" and e["Job ID"] in start:
            t0, site = start[e["Job ID"]]
            by[site][0] += 1
            by[site][1] += (e["Completion Time"] - t0) / 1000
    rows = [(site, int(n), round(s, 2)) for site, (n, s) in by.items()]
    return sorted(rows, key=lambda r: -r[2])


def top_functions(speedscope: Path, top: int = 12) -> list[dict[str, Any]]:
    """Per sampled process with at least 100 samples: the functions with the most samples on
    the stack (inclusive) and at its top (self)."""
    doc = json.loads(speedscope.read_text())
    frames = doc["shared"]["frames"]

    def name(i: int) -> str:
        f = frames[i]
        return f"{f['name']} ({f.get('file', '').split('site-packages/')[-1].replace(str(ROOT) + '/', '')}:{f.get('line', '')})"

    out = []
    for prof in doc["profiles"]:
        samples = [s for s in prof["samples"] if s]
        if len(samples) < 100:
            continue
        self_c: collections.Counter[int] = collections.Counter(s[-1] for s in samples)
        incl: collections.Counter[int] = collections.Counter(f for s in samples for f in set(s))
        out.append(
            {
                "process": prof["name"],
                "samples": len(samples),
                "self": [(name(i), c) for i, c in self_c.most_common(top)],
                "inclusive": [(name(i), c) for i, c in incl.most_common(top * 3)],
            }
        )
    return out


JFR_PERIOD = "2 ms"
"""How often JFR samples each running Java thread (its `profile` settings: 10 ms, too few
samples of a 20-second hour's stages to rank methods by)."""


def jfr_tool() -> str | None:
    """The JDK's `jfr` command, beside the `java` Spark runs (None: a JRE without it)."""
    java = shutil.which("java", path=os.path.join(os.environ.get("JAVA_HOME", ""), "bin"))
    java = java or shutil.which("java")
    tool = Path(os.path.realpath(java)).parent / "jfr" if java else None
    return str(tool) if tool and tool.is_file() else None


def jfr_java_options(tool: str, recording: Path) -> str:
    """The JVM options (for `JAVA_TOOL_OPTIONS`, which every JVM adds to its own: recon's options
    for the hour stay as they are) that record the run with JFR into `recording`."""
    settings = recording.with_suffix(".jfc")
    subprocess.run(
        [tool, "configure", "--input", "profile", f"jdk.ExecutionSample#period={JFR_PERIOD}",
         "--output", str(settings)],
        check=True, capture_output=True,
    )  # fmt: skip
    return f"-XX:StartFlightRecording=filename={recording},settings={settings}"


def stage_windows(event_log: Path) -> list[tuple[float, float, int, str]]:
    """(submitted, completed (epoch ms), stage id, its job's description or call site) of each
    completed stage of an uncompressed Spark event log."""
    job_of: dict[int, str] = {}
    out = []
    for line in event_log.read_text().splitlines():
        e = json.loads(line)
        if e["Event"] == "SparkListenerJobStart":
            props = e.get("Properties", {})
            site = props.get("spark.job.description") or props.get("callSite.short", "?")
            job_of.update({s: site.replace(str(ROOT) + "/", "") for s in e["Stage IDs"]})
        elif e["Event"] == "SparkListenerStageCompleted":
            si = e["Stage Info"]
            sid = si["Stage ID"]
            out.append((si["Submission Time"], si["Completion Time"], sid, job_of.get(sid, "?")))
    return out


def java_by_stage(
    samples: list[dict[str, Any]], stages: list[tuple[float, float, int, str]], top: int = 15
) -> list[dict[str, Any]]:
    """JFR's execution samples (`jfr print --json`'s events) of Spark's executor threads, each
    in the stage running when it was taken (-1: none): per stage (most samples first), its
    samples and the Java methods on most of their stacks (inclusive: once a stack)."""
    per: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    count: collections.Counter[int] = collections.Counter()
    for e in samples:
        v = e["values"]
        thread = (v.get("sampledThread") or {}).get("javaName") or ""
        if not v.get("stackTrace") or not thread.startswith("Executor task launch"):
            continue
        at = datetime.fromisoformat(v["startTime"].replace("Z", "+00:00")).timestamp() * 1000
        sid = next((s for t0, t1, s, _ in stages if t0 <= at <= t1), -1)
        count[sid] += 1
        methods = {_method(f) for f in v["stackTrace"]["frames"]}
        per[sid].update(methods)
    names = {s: site for _, _, s, site in stages}
    return [
        {"stage": sid, "job": names.get(sid, "between stages"), "samples": n,
         "methods": per[sid].most_common(top)}
        for sid, n in sorted(count.items(), key=lambda sn: (-sn[1], sn[0]))
    ]  # fmt: skip


def _method(frame: dict[str, Any]) -> str:
    m = frame["method"]
    return f"{m['type']['name'].rsplit('/', 1)[-1]}.{m['name']}"


def jvm_profile(tool: str, recording: Path, event_log: Path) -> list[dict[str, Any]]:
    """`java_by_stage` of a JFR recording and the run's event log."""
    text = subprocess.run(
        [tool, "print", "--json", "--events", "jdk.ExecutionSample", str(recording)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return java_by_stage(json.loads(text)["recording"]["events"], stage_windows(event_log))


def main() -> None:
    ap = argparse.ArgumentParser(description="profile one recon run hour")
    ap.add_argument("--format", default="dataworks_json", choices=sorted(KINDS))
    ap.add_argument("--messages", default="500k")
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--shape", default="hot", choices=HOUR_SHAPES)
    ap.add_argument("--work", default=str(ROOT / "var" / "profile"))
    ap.add_argument("--no-jfr", action="store_true", help="without the JVM's profile (JFR)")
    args = ap.parse_args()
    work = Path(args.work)
    ns = argparse.Namespace(
        keys=args.keys, delete_share=0.1, partitions=2, seed=1, file_per_partition=False
    )
    counts = make_hour(work, args.format, next(iter_sizes(args.messages)), ns, args.shape)
    evlog = work / "eventlog"
    evlog.mkdir()
    env = _env()
    env["RECON_SPARK_CONF"] = json.dumps(
        {"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(evlog), "spark.eventLog.compress": "false"}
    )  # fmt: skip
    tool = None if args.no_jfr else jfr_tool()
    recording = work / "jvm.jfr"
    if tool:
        env["JAVA_TOOL_OPTIONS"] = f"{env.get('JAVA_TOOL_OPTIONS', '')} {jfr_java_options(tool, recording)}".strip()  # fmt: skip
    elif not args.no_jfr:
        print("profile: this JDK has no `jfr` tool beside `java`: the JVM is not profiled")
    spy = Path(sys.executable).parent / "py-spy"
    out = work / "profile.speedscope.json"
    cmd = [str(spy), "record", "--subprocesses", "--rate", "50", "-f", "speedscope", "-o", str(out), "--",
           sys.executable, "-m", "recon.cli", "run", "--pipeline", str(work / "pipeline.yaml"), "--from", HOUR]  # fmt: skip
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=os.getcwd())
    if r.returncode != 0:
        sys.exit(f"profile: recon run failed:\n{r.stdout[-2000:]}{r.stderr[-3000:]}")
    print(f"{args.format}: {counts['messages']:,} messages, recon run {time.perf_counter() - t0:.1f} s under py-spy")  # fmt: skip
    log = next(evlog.rglob("events*"))
    print_python(out, log)
    if tool:
        print_jvm(jvm_profile(tool, recording, log), recording)


def print_python(out: Path, log: Path) -> None:
    jobs = jobs_by_call_site(log)
    print(f"\nSpark jobs by description or call site ({sum(n for _, n, _ in jobs)} jobs, {sum(s for *_, s in jobs):.1f} s):")  # fmt: skip
    for site, n, s in jobs:
        print(f"  {s:7.2f} s  {n:3} job(s)  {site}")
    for p in top_functions(out):
        print(f"\n{p['process'][:100]} ({p['samples']} samples at 50/s)")
        for fn, c in p["self"]:
            print(f"  self {c:5}  {fn}")
    print(f"\nprofile: {out} (open in https://www.speedscope.app), event log: {log}")


def print_jvm(stages: list[dict[str, Any]], recording: Path) -> None:
    print(f"\nThe JVM's executor threads by Spark stage (JFR, a sample every {JFR_PERIOD} of a running thread; methods by samples on the stack):")  # fmt: skip
    for st in stages:
        print(f"\n  stage {st['stage']} ({st['job']}): {st['samples']} samples")
        for method, c in st["methods"]:
            print(f"    {c:6}  {method}")
    print(f"\nJFR recording: {recording} (JDK Mission Control, or `jfr print`)")


if __name__ == "__main__":
    main()
