"""Per-hour merge cost against table size: does an hour cost what its changes cost?

Builds tables of N rows (one hour of N inserts, events written straight to the decoded-events
folder with numpy, so 20M rows take seconds to make), then merges an hour of C updates to random
keys and reports, per table size: wall seconds of that hour's merge + publish, state buckets
touched / total, state rows rewritten, Iceberg data files removed / added, and the JVM's peak
resident memory. With the state in key-hash buckets an hour rewrites only the buckets its keys
hash to, so for a fixed C the rewritten rows grow with N * touched / buckets: a few changes cost
what they touch, but changes to random keys in every bucket rewrite the whole state.

Run: .venv/bin/python -m benchmarks.merge_cost [--rows 100000 400000] [--changes 50]
The issue's scale figure: --rows 1000000 20000000 --changes 1000000 --buckets 16
(numbers, not a pass/fail test; docs/performance.md quotes a run).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from recon.config import DEFAULT_WRITE_MODE, WRITE_MODES, load_config
from recon.core.model import EVENT_SCHEMA
from recon.hours import format_hour
from recon.layout import write_json_atomic
from recon.merge.manifest import load_manifest
from recon.merge.stage import merge_hour
from recon.spark.session import get_spark

H0 = datetime(2026, 1, 1, tzinfo=UTC)
CHUNK = 2_000_000
TYPES = [("id", "int64"), ("v", "string"), ("amount", "decimal(12,2)")]


def _strings(a: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(a), pa.string())


def _map(columns: list[tuple[str, pa.Array]], n: int) -> pa.Array:
    """A map<string,string> column with the same keys in every row, from one array per key."""
    k = len(columns)
    keys = pa.array([name for name, _ in columns] * n, pa.string())
    values = pa.concat_arrays([v for _, v in columns])
    # row i's entries are at i, n + i, 2n + i, ...: interleave them row by row
    values = values.take(pa.array((np.arange(k)[None, :] * n + np.arange(n)[:, None]).ravel()))
    offsets = pa.array(np.arange(0, k * n + 1, k, dtype=np.int32))
    return pa.MapArray.from_arrays(offsets, keys, values)


def _events(start: int, keys: np.ndarray, tag: str, op: str) -> pa.Table:
    """Events of `op` for `keys` (numpy, vectorised: 20M rows in seconds), one order key each
    from `start` on, in one partition."""
    n = len(keys)
    pos = np.arange(start, start + n, dtype=np.uint64)
    img = _map(
        [
            ("id", _strings(keys)),
            ("v", pc.binary_join_element_wise(tag, _strings(keys), "")),
            ("amount", pc.binary_join_element_wise(_strings(keys % 1000), "25", ".")),
        ],
        n,
    )
    # order key: u64(n) + kafka_tail(0, n) = 8 + 4 + 8 big-endian bytes
    raw = np.zeros((n, 20), np.uint8)
    raw[:, 0:8] = pos.astype(">u8").view(np.uint8).reshape(n, 8)
    raw[:, 12:20] = raw[:, 0:8]
    order_key = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(20), n, [None, pa.py_buffer(raw.tobytes())]
    ).cast(pa.binary())
    types = _map([(name, pa.repeat(t, n)) for name, t in TYPES], n)
    pk = pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), pa.repeat("id", n))
    t0 = int(H0.timestamp() * 1000)
    cols = {
        "db": pa.repeat("b", n),
        "tbl": pa.repeat("t", n),
        "op": pa.repeat(op, n),
        "pk": pk,
        "before": img if op == "update" else pa.nulls(n, img.type),
        "after": img,
        "types": types,
        "order_key": order_key,
        "event_time_ms": pa.array(t0 + pos.astype(np.int64)),
        "topic": pa.repeat("bench", n),
        "partition": pa.repeat(pa.scalar(0, pa.int32()), n),
        "offset": pa.array(pos.astype(np.int64)),
        "event_index": pa.repeat(0, n),
    }
    arrays = [
        cols[f.name].cast(f.type) if f.name in cols else pa.nulls(n, f.type) for f in EVENT_SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=EVENT_SCHEMA)


def _hour(cfg: Any, hour: datetime, start: int, keys: np.ndarray, tag: str, op: str) -> None:
    """Write the hour's events (files of at most `CHUNK` rows) and its decode marker."""
    d = cfg.layout.events(hour)
    d.mkdir(parents=True, exist_ok=True)
    for i, lo in enumerate(range(0, len(keys), CHUNK)):
        part = _events(start + lo, keys[lo : lo + CHUNK], tag, op)
        pq.write_table(part, d / f"part-{i:05d}.parquet")
    write_json_atomic(
        cfg.layout.decode_counters(hour), {"pipeline": cfg.name, "hour": format_hour(hour)}
    )


def _jvm_peak_mb() -> float:
    """Peak resident memory of this process's JVM (local Spark: driver and executors)."""
    peak = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            if "java" in p.name():
                with open(f"/proc/{p.pid}/status") as f:
                    hwm = next(x for x in f if x.startswith("VmHWM"))
                peak = max(peak, int(hwm.split()[1]) / 1024)
        except (psutil.Error, OSError, StopIteration):
            continue
    return round(peak)


def run(
    rows: int, changes: int, buckets: int, base: Path, write_mode: str = DEFAULT_WRITE_MODE
) -> dict[str, Any]:
    spark = get_spark("recon-bench")
    doc = {
        "name": "bench",
        "format": "debezium_json",
        "raw_path": str(base / "raw"),
        "topics": ["bench"],
        "warehouse": str(base / "wh"),
        "start": H0.isoformat(),
        "tables": {"b.t": {"primary_key": ["id"]}},
        "buckets": buckets,
        "write_mode": write_mode,
    }
    (base / "bench.yaml").write_text(yaml.safe_dump(doc))
    cfg = load_config(base / "bench.yaml")
    _hour(cfg, H0, 0, np.arange(rows, dtype=np.int64), "v", "insert")
    t0 = time.perf_counter()
    merge_hour(spark, cfg, H0, buckets=buckets)
    load_s = time.perf_counter() - t0
    keys = np.random.default_rng(1).choice(rows, size=min(changes, rows), replace=False)
    h1 = H0 + timedelta(hours=1)
    _hour(cfg, h1, rows, keys.astype(np.int64), "w", "update")
    t0 = time.perf_counter()
    r = merge_hour(spark, cfg, h1, buckets=buckets)
    hour_s = time.perf_counter() - t0
    t = r["tables"]["b.t"]
    man = load_manifest(cfg)
    files = man["tables"]["b.t"]["files"]
    H1 = format_hour(h1)
    rewritten = sum(  # a bucket's delta of the hour, or the bucket rewritten by it
        sum(d["state_rows"] for d in f["deltas"] if d["hour"] == H1)
        if f.get("deltas")
        else f["state_rows"] * (f["hour"] == H1)
        for f in files.values()
    )
    return {
        "rows": rows,
        "changes": len(keys),
        "buckets": buckets,
        "first_load_s": round(load_s, 1),
        "hour_s": round(hour_s, 1),
        "buckets_touched": t["buckets_touched"],
        "state_rows_rewritten": rewritten,
        "files_removed": t["published"]["files_removed"],
        "files_added": t["published"]["files_added"],
        "deletes_added": t["published"].get("deletes_added", 0),
        "write_mode": write_mode,
        # what the hour did: merge-on-read rewrites an hour whose deltas would pass their share
        "hour_merged": "on read" if any(f.get("deltas") for f in files.values()) else "rewritten",
        "rows_after": t["rows_after"],
        "jvm_peak_mb": _jvm_peak_mb(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[50_000, 200_000])
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--buckets", type=int, nargs="+", default=[16, 256])
    ap.add_argument("--work", default=tempfile.gettempdir(), help="folder for the tables")
    ap.add_argument("--write-mode", default=DEFAULT_WRITE_MODE, choices=WRITE_MODES)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    print(
        f"{'rows':>9} {'changes':>7} {'buckets':>7} {'load s':>7} {'hour s':>7} "
        f"{'touched':>8} {'rows rewritten':>15} {'files -/+':>10} {'JVM MB':>7} hour",
        flush=True,
    )
    results = []
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    for buckets in args.buckets:
        for n in args.rows:
            base = Path(tempfile.mkdtemp(prefix="recon-bench-", dir=work))
            try:
                r = run(n, args.changes, buckets, base, args.write_mode)
            finally:
                shutil.rmtree(base, ignore_errors=True)
            results.append(r)
            print(
                f"{r['rows']:>9} {r['changes']:>7} {r['buckets']:>7} {r['first_load_s']:>7} "
                f"{r['hour_s']:>7} {r['buckets_touched']:>4}/{buckets:<4}"
                f"{r['state_rows_rewritten']:>15} {r['files_removed']:>4}/{r['files_added']:<5}"
                f"{r['jvm_peak_mb']:>7} {r['hour_merged']}",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
