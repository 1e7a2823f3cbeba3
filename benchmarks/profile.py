"""Where one `recon run` hour spends its time: generates an hour (as `make bench` does), runs
`recon run` under py-spy (every process: the driver program and Spark's Python workers) with
Spark's event log on, then prints the Spark jobs by description or call site (count, seconds)
and the Python functions with the most samples, per process. The README's "Speed" section quotes one run's jobs.

Run: .venv/bin/python -m benchmarks.profile [--format dataworks_json] [--messages 500k]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.formats import KINDS
from benchmarks.gen import iter_sizes
from benchmarks.run import HOUR, ROOT, _env, make_hour


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


def main() -> None:
    ap = argparse.ArgumentParser(description="profile one recon run hour")
    ap.add_argument("--format", default="dataworks_json", choices=sorted(KINDS))
    ap.add_argument("--messages", default="500k")
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--work", default=str(ROOT / "var" / "profile"))
    args = ap.parse_args()
    work = Path(args.work)
    ns = argparse.Namespace(
        keys=args.keys, delete_share=0.1, partitions=2, seed=1, file_per_partition=False
    )
    counts = make_hour(work, args.format, next(iter_sizes(args.messages)), ns)
    evlog = work / "eventlog"
    evlog.mkdir()
    env = _env()
    env["RECON_SPARK_CONF"] = json.dumps(
        {"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(evlog), "spark.eventLog.compress": "false"}
    )  # fmt: skip
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
    jobs = jobs_by_call_site(log)
    print(f"\nSpark jobs by description or call site ({sum(n for _, n, _ in jobs)} jobs, {sum(s for *_, s in jobs):.1f} s):")  # fmt: skip
    for site, n, s in jobs:
        print(f"  {s:7.2f} s  {n:3} job(s)  {site}")
    for p in top_functions(out):
        print(f"\n{p['process'][:100]} ({p['samples']} samples at 50/s)")
        for fn, c in p["self"]:
            print(f"  self {c:5}  {fn}")
    print(f"\nprofile: {out} (open in https://www.speedscope.app), event log: {log}")


if __name__ == "__main__":
    main()
