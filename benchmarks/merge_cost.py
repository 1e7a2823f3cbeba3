"""Per-hour merge cost against table size: does an hour cost what its changes cost?

Builds tables of N rows (one hour of N inserts), then merges an hour of C updates to random
keys and reports, per table size: wall seconds of that hour's merge + publish, state buckets
touched / total, state rows rewritten, Iceberg data files removed / added. With the state in
key-hash buckets an hour rewrites only the buckets its keys hash to, so for a fixed C the
rewritten rows grow with N * touched / buckets, not with N itself when buckets scale with N.

Run: .venv/bin/python benchmarks/merge_cost.py [--rows 100000 400000] [--changes 50]
(numbers, not a pass/fail test; the README quotes a run).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from recon.config import load_config
from recon.core.model import EVENT_SCHEMA
from recon.core.order import kafka_tail, u64
from recon.hours import format_hour
from recon.layout import write_json_atomic
from recon.merge.manifest import load_manifest
from recon.merge.stage import merge_hour
from recon.spark.session import get_spark

H0 = datetime(2026, 1, 1, tzinfo=UTC)
TYPES = [("id", "int64"), ("v", "string"), ("amount", "decimal(12,2)")]


def _events(start: int, rows: list[tuple[int, str]], op: str) -> pa.Table:
    cols: dict[str, list] = {f.name: [] for f in EVENT_SCHEMA}
    for i, (key, v) in enumerate(rows):
        n = start + i
        img = [("id", str(key)), ("v", v), ("amount", f"{key % 1000}.25")]
        for name, val in {
            "db": "b",
            "tbl": "t",
            "op": op,
            "pk": ["id"],
            "before": img if op == "update" else None,
            "after": img,
            "types": TYPES,
            "order_key": u64(n) + kafka_tail(0, n),
            "gtid": None,
            "binlog_file": None,
            "binlog_pos": None,
            "seq": None,
            "event_index": 0,
            "txn_id": None,
            "event_time_ms": int(H0.timestamp() * 1000) + n,
            "ddl": None,
            "topic": "bench",
            "partition": 0,
            "offset": n,
        }.items():
            cols[name].append(val)
    return pa.Table.from_pydict(cols, schema=EVENT_SCHEMA)


def _hour(cfg, hour: datetime, table: pa.Table) -> None:
    d = cfg.layout.events(hour)
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, d / "part-00000.parquet")
    write_json_atomic(
        cfg.layout.decode_counters(hour), {"pipeline": cfg.name, "hour": format_hour(hour)}
    )


def run(rows: int, changes: int, buckets: int, base: Path) -> dict:
    import random

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
    }
    (base / "bench.yaml").write_text(yaml.safe_dump(doc))
    cfg = load_config(base / "bench.yaml")
    _hour(cfg, H0, _events(0, [(k, f"v{k}") for k in range(rows)], "insert"))
    t0 = time.perf_counter()
    merge_hour(spark, cfg, H0, buckets=buckets)
    load_s = time.perf_counter() - t0
    rnd = random.Random(1)
    keys = rnd.sample(range(rows), changes)
    h1 = H0 + timedelta(hours=1)
    _hour(cfg, h1, _events(rows, [(k, f"w{k}") for k in keys], "update"))
    t0 = time.perf_counter()
    r = merge_hour(spark, cfg, h1, buckets=buckets)
    hour_s = time.perf_counter() - t0
    t = r["tables"]["b.t"]
    man = load_manifest(cfg)
    files = man["tables"]["b.t"]["files"]
    rewritten = sum(f["state_rows"] for f in files.values() if f["hour"] == format_hour(h1))
    return {
        "rows": rows,
        "changes": changes,
        "buckets": buckets,
        "first_load_s": round(load_s, 1),
        "hour_s": round(hour_s, 1),
        "buckets_touched": t["buckets_touched"],
        "state_rows_rewritten": rewritten,
        "files_removed": t["published"]["files_removed"],
        "files_added": t["published"]["files_added"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[50_000, 200_000])
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--buckets", type=int, nargs="+", default=[16, 256])
    args = ap.parse_args()
    print(
        f"{'rows':>9} {'changes':>7} {'buckets':>7} {'load s':>7} {'hour s':>7} "
        f"{'touched':>8} {'rows rewritten':>15} {'files -/+':>10}"
    )
    for buckets in args.buckets:
        for n in args.rows:
            base = Path(tempfile.mkdtemp(prefix="recon-bench-"))
            try:
                r = run(n, args.changes, buckets, base)
            finally:
                shutil.rmtree(base, ignore_errors=True)
            print(
                f"{r['rows']:>9} {r['changes']:>7} {r['buckets']:>7} {r['first_load_s']:>7} "
                f"{r['hour_s']:>7} {r['buckets_touched']:>4}/{buckets:<4}"
                f"{r['state_rows_rewritten']:>15} {r['files_removed']:>4}/{r['files_added']:<5}"
            )


if __name__ == "__main__":
    main()
