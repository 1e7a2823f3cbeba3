"""`make bench`: one hour of each format at two sizes, through three paths, each a fresh process
on the same data: the copy floor, the naive job a user would write (`benchmarks.paths`) and
`recon run` (decode, merge, publish, audit). Times, peak memory, row counts; the marginal rate
(between the two sizes) and the fixed cost (the small size's time minus its messages at that
rate) per path; the issue's targets as ratios. Writes benchmarks/results/latest.json and
latest.png and prints a Markdown table (docs/performance.md quotes one).

Run: .venv/bin/python -m benchmarks.run [--formats ...] [--sizes 100k,2m] [--keys 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import psutil
import yaml

from benchmarks.formats import KINDS
from benchmarks.gen import SHAPES, cut_to_messages, hour_start, iter_sizes, plan, write_hour
from recon.demo.sample import CREATE_SQL

ROOT = Path(__file__).resolve().parent.parent
HOUR = "2026-03-02T10"
PATHS = ("copy", "naive", "recon")


class TreeSampler(threading.Thread):
    """A thread that samples a process tree (`root` and its descendants) until `done` is set."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.done = threading.Event()


Sampler = TypeVar("Sampler", bound=TreeSampler)


def sampled(
    cmd: list[str],
    env: dict[str, str],
    watch: Callable[[int], Sampler],
    what: str,
    cwd: Path | None = None,
) -> tuple[float, str, Sampler]:
    """Run `cmd` to its end, `watch` sampling its process tree meanwhile: (its seconds, its
    standard output, the sampler); when it fails, exit naming `what` with its output's end."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)  # fmt: skip
    sampler = watch(proc.pid)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    sampler.done.set()
    sampler.join()
    if proc.returncode != 0:
        sys.exit(f"{what} failed ({proc.returncode}):\n{out[-2000:]}{err[-3000:]}")
    return seconds, out, sampler


class PeakMemory(TreeSampler):
    """Samples the memory of a process tree: the JVM's resident size (driver and executors: one
    process in local mode), the Python processes' proportional set sizes (driver program and
    Spark's workers, where the system reports it): the workers are forked from one daemon, and
    summing their resident sizes counted the pages they share once per worker (the same hour
    measured 0.9 or 3.9 GB of Python that way, by how many workers were alive at once)."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.peak = {"total_mb": 0.0, "jvm_mb": 0.0, "python_mb": 0.0}

    def run(self) -> None:
        while not self.done.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
                jvm = py = 0.0
                for p in procs:
                    try:
                        if "java" in p.name():  # one process: its resident size
                            jvm += p.memory_info().rss / 2**20
                        else:
                            py += _proportional_mb(p)
                    except psutil.Error:
                        pass
                for k, v in (("total_mb", jvm + py), ("jvm_mb", jvm), ("python_mb", py)):
                    self.peak[k] = max(self.peak[k], round(v, 1))
            except psutil.Error:
                pass
            self.done.wait(0.2)


def _proportional_mb(p: psutil.Process) -> float:
    """A Python process's proportional set size (the kernel's summary, cheap to read), else its
    resident size."""
    try:
        with open(f"/proc/{p.pid}/smaps_rollup", encoding="ascii") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float(p.memory_info().rss) / 2**20


def timed(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    seconds, out, mem = sampled(cmd, env, PeakMemory, f"bench: {' '.join(cmd[:4])}")
    return {"seconds": round(seconds, 2), "peak": mem.peak, "stdout": out}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    py = sys.executable
    env.setdefault("PYSPARK_PYTHON", py)
    env.setdefault("PYSPARK_DRIVER_PYTHON", py)
    env["PATH"] = f"{Path(py).parent}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = f"{ROOT}:{env.get('PYTHONPATH', '')}"
    return env


HOUR_SHAPES = (*SHAPES, *(f"{s}+spread" for s in SHAPES))
"""An hour's shape (`make_hour`): how its changes fall on keys (`benchmarks.gen.SHAPES`), and
with `+spread` its dumps' records spread over the files out of Kafka's order."""


def make_hour(
    work: Path, fmt: str, messages: int, args: argparse.Namespace, shape: str = "hot"
) -> dict[str, Any]:
    """Generate the hour (of `shape`: `HOUR_SHAPES`) and the pipeline config that reads it."""
    shutil.rmtree(work, ignore_errors=True)
    kinds = KINDS[fmt]()
    keys, _, spread = shape.partition("+")
    p = plan(hour_start(HOUR), messages, args.keys, args.delete_share, args.partitions, args.seed, keys)  # fmt: skip
    p = cut_to_messages(p, kinds, messages)
    t0 = time.perf_counter()
    counts: dict[str, Any] = dict(
        write_hour(
            p,
            kinds,
            work / "raw",
            "bench",
            file_per_partition=args.file_per_partition,
            spread=bool(spread),
        )
    )
    counts["generate_seconds"] = round(time.perf_counter() - t0, 2)
    counts["changes_per_key"] = round(p.n / max(len(np.unique(p.key)), 1), 2)
    counts["expected_rows"] = p.expected_rows()
    tables: dict[str, Any] = {"shop.orders": {}}
    if fmt == "tencent_dts_pb":  # its messages carry no column types to publish by
        tables = {"shop.orders": {"ddl": CREATE_SQL}}
    doc = {
        "name": "bench",
        "format": fmt,
        "raw_path": "raw",
        "topics": ["bench"],
        "warehouse": "wh",
        "start": f"{HOUR}:00:00Z",
        "tables": tables,
    }
    (work / "pipeline.yaml").write_text(yaml.safe_dump(doc))
    return counts


def recon_rows(work: Path) -> int:
    from recon.config import load_config
    from recon.publish.iceberg import load_table

    table = load_table(load_config(work / "pipeline.yaml"), "shop.orders")
    return int(table.scan(selected_fields=("id",)).to_arrow().num_rows)


def _command(work: Path, fmt: str, path: str) -> list[str]:
    if path == "recon":
        return [sys.executable, "-m", "recon.cli", "run", "--pipeline", str(work / "pipeline.yaml"), "--from", HOUR]  # fmt: skip
    hour_dir = str(work / "raw" / "bench")
    return [sys.executable, "-m", "benchmarks.paths", path, "--format", fmt, "--hour-dir", hour_dir, "--out", str(work / path)]  # fmt: skip


def round_order(turns: Sequence[str], n: int) -> list[str]:
    """What runs in turns (the bench's paths, `benchmarks.ab`'s versions) in round `n`'s
    order: the given order turned by `n`, so that over as many rounds as there are of them
    each runs in each place once. One order every round measures the order as well: the one
    run second came out faster (benchmarks/HISTORY.md, "Session 53's measurements")."""
    k = n % len(turns) if turns else 0
    return [*turns[k:], *turns[:k]]


def run_paths(work: Path, fmt: str, paths: tuple[str, ...], repeat: int = 1) -> dict[str, Any]:
    """Each path `repeat` times, in turns (copy, naive, recon, then naive, recon, copy, ...: a
    slow minute of the machine falls on every path alike, and no path always runs first:
    `round_order`), each a fresh process; `median_of` their runs."""
    env = _env()
    tries: dict[str, list[dict[str, Any]]] = {path: [] for path in paths}
    for n in range(repeat):
        for path in round_order(paths, n):
            if path == "recon":  # from an empty warehouse each time: the same work
                shutil.rmtree(work / "wh", ignore_errors=True)
            res = timed(_command(work, fmt, path), env)
            stdout = res.pop("stdout")
            if path == "recon":
                res["rows"] = recon_rows(work)
            else:
                res["rows"] = int(stdout.split("rows ")[-1].split()[0])
            tries[path].append(res)
            print(f"  {path:<6} {res['seconds']:>7.1f} s  rows {res['rows']:>8}  peak {res['peak']['total_mb']:.0f} MB", flush=True)  # fmt: skip
    return {path: median_of(runs) for path, runs in tries.items()}


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One path's runs as one: the median time (each run's in `runs_seconds`), the highest
    peak memory, and the rows (every run must have the same)."""
    rows = {r["rows"] for r in runs}
    if len(rows) != 1:
        sys.exit(f"bench: the runs of one path gave different row counts: {sorted(rows)}")
    seconds = sorted(r["seconds"] for r in runs)
    mid = len(seconds) // 2
    median = seconds[mid] if len(seconds) % 2 else (seconds[mid - 1] + seconds[mid]) / 2
    return {
        "seconds": round(median, 2),
        "runs_seconds": [r["seconds"] for r in runs],
        "peak": max((r["peak"] for r in runs), key=lambda p: p["total_mb"]),
        "rows": rows.pop(),
    }


def derive(fmt: str, sizes: list[dict[str, Any]]) -> dict[str, Any]:
    """Marginal rate and fixed cost per path from the two sizes, and the targets."""
    small, big = sizes[0], sizes[-1]
    d: dict[str, Any] = {}
    for path in PATHS:
        if path not in small["paths"]:
            continue
        dt = big["paths"][path]["seconds"] - small["paths"][path]["seconds"]
        dm = big["messages"] - small["messages"]
        dc = big["changes"] - small["changes"]
        if dt <= 0:  # the sizes are too close for this machine's noise: no rate to report
            d[path] = dict.fromkeys(("marginal_messages_per_s", "marginal_changes_per_s", "fixed_seconds"))  # fmt: skip
            continue
        rate = dm / dt
        d[path] = {
            "marginal_messages_per_s": round(rate),
            "marginal_changes_per_s": round(dc / dt),
            "fixed_seconds": round(small["paths"][path]["seconds"] - small["messages"] / rate, 2),
        }
    # the ratios need recon's and the naive job's rates (the copy floor is context)
    noisy = [p for p in ("naive", "recon") if d[p]["marginal_messages_per_s"] is None]
    if noisy:
        d["noise"] = (
            f"{', '.join(noisy)} took no longer at the larger size: use sizes further apart"
        )
    else:
        r, n = d["recon"], d["naive"]
        d["recon_vs_naive_marginal"] = round(r["marginal_messages_per_s"] / n["marginal_messages_per_s"], 3)  # fmt: skip
        d["recon_vs_naive_fixed"] = round(r["fixed_seconds"] / max(n["fixed_seconds"], 0.01), 2)
        cores = os.cpu_count() or 1
        d["recon_changes_per_s_per_core"] = round((r["marginal_changes_per_s"] or 0) / cores)
        d["targets"] = {
            "marginal >= naive" if fmt != "tencent_dts_pb" else "changes/s/core >= 50k": (
                d["recon_vs_naive_marginal"] >= 1
                if fmt != "tencent_dts_pb"
                else d["recon_changes_per_s_per_core"] >= 50_000
            ),
            "fixed <= 2x naive": d["recon_vs_naive_fixed"] <= 2,
        }
    return d


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "| format | messages | copy floor | naive | `recon run` | rows equal | peak MB naive / recon |",
        "|---|---:|---:|---:|---:|:--:|---:|",
    ]
    for fmt, r in results["formats"].items():
        for s in r["sizes"]:
            p = s["paths"]
            same = p["recon"]["rows"] == p["naive"]["rows"] == s["expected_rows"]
            lines.append(
                f"| {fmt} | {s['messages']:,} | {p['copy']['seconds']:.1f} s | "
                f"{p['naive']['seconds']:.1f} s | {p['recon']['seconds']:.1f} s | {'yes' if same else 'NO'} | "
                f"{p['naive']['peak']['total_mb']:,.0f} / {p['recon']['peak']['total_mb']:,.0f} |"
            )
        d = r["derived"]
        for label, key, fmt_ in (("marginal msg/s", "marginal_messages_per_s", "{:,}"), ("fixed s", "fixed_seconds", "{:.1f}")):  # fmt: skip
            cells = ["noise" if d[p][key] is None else fmt_.format(d[p][key]) for p in PATHS]
            lines.append(f"| {fmt} | {label} | " + " | ".join(cells) + " | | |")
    return "\n".join(lines)


def chart(results: dict[str, Any], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["formats"])
    fmts = list(dict.fromkeys(results["formats"][n].get("format", n) for n in names))
    shapes = list(dict.fromkeys(results["formats"][n].get("shape", "hot") for n in names))
    fig, axes = plt.subplots(
        len(fmts), len(shapes), figsize=(5 * len(shapes), 4 * len(fmts)), squeeze=False
    )
    for ax in axes.flat:
        ax.set_visible(False)
    for fmt in names:
        entry = results["formats"][fmt]
        at = fmts.index(entry.get("format", fmt)), shapes.index(entry.get("shape", "hot"))
        ax = axes[at]
        ax.set_visible(True)
        sizes = entry["sizes"]
        for path in PATHS:
            xs = [s["messages"] / 1000 for s in sizes]
            ys = [s["paths"][path]["seconds"] for s in sizes]
            ax.plot(xs, ys, marker="o", label=path)
        ax.set_title(fmt)
        ax.set_xlabel("messages in the hour (thousands)")
        ax.set_ylabel("seconds, end to end")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"one hour, each path a fresh process ({results['machine']['cores']} cores)")
    fig.tight_layout()
    fig.savefig(png, dpi=100)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="the speed benchmark (docs/performance.md)")
    ap.add_argument("--formats", default=",".join(KINDS))
    # 2M, not 500k (before session 62): a 400k-message step is a few seconds of work, which one
    # slow minute of a shared machine moves by a third (the same code's DataWorks ratio 0.69x
    # and 1.46x on one day); a 1.9M-message step is 10-20 s of it
    ap.add_argument("--sizes", default="100k,2m", help="messages per hour, two sizes")
    ap.add_argument("--keys", type=int, default=100_000, help="the hot shape's keys")
    ap.add_argument(
        "--shapes", default="hot,zipf,distinct,hot+spread",
        help=f"hour shapes, from {', '.join(HOUR_SHAPES)} (benchmarks/gen.py SHAPES)",
    )  # fmt: skip
    ap.add_argument("--delete-share", type=float, default=0.1)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument(
        "--file-per-partition", action="store_true",
        help="a dump file per Kafka partition (Kafka Connect's S3 sink), not all in each",
    )  # fmt: skip
    ap.add_argument(
        "--small", default="1k", help="a small hour's messages, each format (empty: none)"
    )
    ap.add_argument(
        "--state-rows", default="1m,20m",
        help="an hour of --state-changes updates merged into states of these two sizes "
        "(benchmarks/merge_cost.py; empty: none)",
    )  # fmt: skip
    ap.add_argument("--state-changes", default="1m")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default=str(ROOT / "var" / "bench"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument(
        "--repeat", type=int, default=1,
        help="runs of each path per size, in turns; the median counts (3: ~3x the time)",
    )  # fmt: skip
    ap.add_argument(
        "--report", metavar="JSON", help="print the table of saved results, run nothing"
    )
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    if args.report:
        report(json.loads(Path(args.report).read_text()), Path(args.report).parent)
        return
    sizes = list(iter_sizes(args.sizes))
    state_rows = list(iter_sizes(args.state_rows)) if args.state_rows else []
    fmts = [f.strip() for f in args.formats.split(",")]
    shapes = [x.strip() for x in args.shapes.split(",")]
    bad = [f for f in fmts if f not in KINDS] + [x for x in shapes if x not in HOUR_SHAPES]
    if bad or len(sizes) != 2 or args.repeat < 1 or len(state_rows) not in (0, 2):
        sys.exit(
            f"bench: --formats from {', '.join(KINDS)}; --shapes from {', '.join(HOUR_SHAPES)}; "
            "--sizes two sizes like 100k,2m; --repeat 1 or more; --state-rows two sizes like "
            "1m,20m, or empty for none"
        )
    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30), "python": platform.python_version()},  # fmt: skip
        "workload": {"keys": args.keys, "delete_share": args.delete_share, "partitions": args.partitions, "file_per_partition": args.file_per_partition},
        "repeat": args.repeat,
        "formats": {},
    }  # fmt: skip
    for fmt in fmts:
        for shape in shapes:
            runs = []
            for size in sizes:
                work = Path(args.work) / f"{fmt}-{size}"
                counts = make_hour(work, fmt, size, args, shape)
                print(f"{fmt} {shape}: {counts['messages']:,} messages ({counts['changes']:,} changes, {counts['changes_per_key']} a key, generated in {counts['generate_seconds']} s)", flush=True)  # fmt: skip
                counts["paths"] = run_paths(work, fmt, PATHS, args.repeat)
                runs.append(counts)
                shutil.rmtree(work, ignore_errors=True)
            name = fmt if shape == "hot" else f"{fmt} {shape}"
            entry = {"format": fmt, "shape": shape, "sizes": runs, "derived": derive(fmt, runs)}
            results["formats"][name] = entry
        if args.small:  # a small hour: what the cluster pays 24 times a day per pipeline
            work = Path(args.work) / f"{fmt}-small"
            counts = make_hour(work, fmt, next(iter_sizes(args.small)), args)
            print(f"{fmt} small: {counts['messages']:,} messages", flush=True)
            counts["paths"] = run_paths(work, fmt, PATHS, args.repeat)
            results.setdefault("small", {})[fmt] = counts
            shutil.rmtree(work, ignore_errors=True)
    if state_rows:
        changes = next(iter_sizes(args.state_changes))
        results["state"] = state_cost(state_rows, changes, Path(args.work))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(json.dumps(results, indent=2) + "\n")
    chart(results, out / "latest.png")
    report(results, out)


STATE_TARGET = 1.5
"""An hour into the larger state takes at most this many times its time into the smaller."""


def state_cost(rows: list[int], changes: int, work: Path) -> dict[str, Any]:
    """The same hour of `changes` updates merged into states of `rows` (two sizes), each in a
    fresh process (`benchmarks.merge_cost`, 16 buckets, the default write mode; one process for
    both would run the smaller cold and the larger on a warm JVM): each hour's seconds, and the
    larger's against the smaller's."""
    work.mkdir(parents=True, exist_ok=True)
    runs = []
    for n in rows:
        print(f"state: an hour of {changes:,} changes into {n:,} rows", flush=True)
        out = work / f"state-cost-{n}.json"
        argv = [sys.executable, "-m", "benchmarks.merge_cost", "--rows", str(n), "--changes",
                str(changes), "--buckets", "16", "--work", str(work), "--json", str(out)]  # fmt: skip
        subprocess.run(argv, check=True, cwd=ROOT)
        runs.extend(json.loads(out.read_text()))
    return state_summary(runs, changes)


def state_summary(runs: list[dict[str, Any]], changes: int) -> dict[str, Any]:
    """`merge_cost`'s two runs (smaller state first) judged: the larger hour's time against the
    smaller's, and whether it meets `STATE_TARGET`."""
    ratio = round(runs[1]["hour_s"] / max(runs[0]["hour_s"], 0.01), 2)
    return {"changes": changes, "runs": runs, "ratio": ratio, "met": ratio <= STATE_TARGET}


def report(results: dict[str, Any], out: Path) -> None:
    print()
    print(markdown(results))
    print()
    ok = True
    for fmt, r in results["formats"].items():
        d = r["derived"]
        for s in r["sizes"]:
            p = s["paths"]
            if not p["recon"]["rows"] == p["naive"]["rows"] == s["expected_rows"]:
                ok = False
                print(f"ROWS DIFFER {fmt} {s['messages']}: recon {p['recon']['rows']}, naive {p['naive']['rows']}, expected {s['expected_rows']}")  # fmt: skip
        if "noise" in d:
            print(f"{fmt}: no ratios: {d['noise']}")
            continue
        print(
            f"{fmt}: recon/naive marginal rate {d['recon_vs_naive_marginal']}x, fixed cost "
            f"{d['recon_vs_naive_fixed']}x; recon {d['recon_changes_per_s_per_core']:,} changes/s/core; "
            + ", ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in d["targets"].items())
        )
    for fmt, small in results.get("small", {}).items():
        p = small["paths"]
        ratio = p["recon"]["seconds"] / max(p["naive"]["seconds"], 0.01)
        print(
            f"{fmt} small hour ({small['messages']:,} messages): recon {p['recon']['seconds']:.1f} s, "
            f"naive {p['naive']['seconds']:.1f} s ({ratio:.2f}x), copy {p['copy']['seconds']:.1f} s"
        )
    if "state" in results:
        st = results["state"]
        small, big = st["runs"]
        print(
            f"state: an hour of {st['changes']:,} changes into {small['rows']:,} rows "
            f"{small['hour_s']} s, into {big['rows']:,} rows {big['hour_s']} s: {st['ratio']}x "
            f"(target <= {STATE_TARGET}x: {'met' if st['met'] else 'NOT met'}; JVM peak "
            f"{big['jvm_peak_mb']:,} MB)"
        )
    print(f"\nresults: {out / 'latest.json'}, chart: {out / 'latest.png'}")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
