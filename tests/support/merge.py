"""Helpers for merge tests: hand an hour of canonical events to the merge stage directly (what
the decode stage writes), and read back what was merged and published."""

from __future__ import annotations

import shutil
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import ManifestContent

from recon.config import PipelineConfig
from recon.core.model import EVENT_SCHEMA
from recon.core.order import kafka_tail, u64
from recon.decode.premerge.prefold import Prefold
from recon.decode.premerge.value_classes import ValueClasses
from recon.decode.stats import DecodeCounters
from recon.decode.summary import SHAPE_FIELDS, DecodedShapes, shape_texts
from recon.hours import format_hour, parse_hour
from recon.layout import folder_files, write_json_atomic
from recon.merge.manifest import load_manifest
from recon.publish.iceberg import load_table

H0 = parse_hour("2026-01-01T00")
"""The first hour of the stage tests' pipelines (`tests.support.builders.pipeline`'s start)."""
T = {"id": "int32", "v": "string"}
"""The column types of the stage tests' tables."""
UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
"""A MySQL server's UUID, for GTIDs."""


def hour(i: int) -> datetime:
    """The `i`th hour from `H0`."""
    return H0 + timedelta(hours=i)


def event(
    n: int,
    table: str,
    op: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    types: dict[str, str],
    pk: list[str] | None = None,
    **src: Any,
) -> dict[str, Any]:
    db, tbl = table.split(".")

    def img(d: dict[str, Any] | None) -> list[tuple[str, str | None]] | None:
        return None if d is None else [(k, None if v is None else str(v)) for k, v in d.items()]

    return {
        "db": db,
        "tbl": tbl,
        "op": op,
        "pk": pk or [],
        "before": img(before),
        "after": img(after),
        "types": list(types.items()),
        "order_key": u64(n) + kafka_tail(0, n),
        "gtid": src.get("gtid"),
        "binlog_file": src.get("binlog_file"),
        "binlog_pos": src.get("binlog_pos"),
        "seq": src.get("seq"),
        "event_index": 0,
        "txn_id": None,
        "event_time_ms": 1_767_225_600_000 + n * 1000,
        "ddl": src.get("ddl"),
        "defaults": None if src.get("defaults") is None else list(src["defaults"].items()),
        "topic": "t",
        "partition": 0,
        "offset": n,
    }


def write_hour(
    cfg: PipelineConfig, hour: datetime, events: list[dict[str, Any]], prefold: bool = False
) -> None:
    """What the decode stage leaves for the merge: the hour's events and its counters file.
    `prefold`: also what a decode task's pre-fold leaves (`recon.decode.premerge.prefold`: the winners,
    whenever anything was superseded, and the counts the decode keeps beside the shapes)."""
    d = cfg.layout.events(hour)
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("*.parquet"):
        old.unlink()
    table = pa.Table.from_pylist(events, schema=EVENT_SCHEMA)
    pq.write_table(table, d / "part-00000.parquet")
    by_op: dict[str, int] = {}
    for e in events:
        by_op[e["op"]] = by_op.get(e["op"], 0) + 1
    counters: DecodeCounters = {  # as if every event came from one record
        "pipeline": cfg.name,
        "hour": format_hour(hour),
        "run_id": "written-by-test",
        "format": cfg.format,
        "previous_hour_decoded": True,
        "carried_in_available": False,
        "totals": {"records": len(events), "records_in": len(events)},
        "events_by_op": by_op,
        "ddl": [e["ddl"] for e in events if e["op"] == "ddl"],
        "quarantine_reasons": {},
        "partitions": [],
    }
    if prefold:
        counters["event_shapes"] = _prefolded(cfg, hour, table)
    write_json_atomic(cfg.layout.decode_counters(hour), counters)


def _prefolded(cfg: PipelineConfig, hour: datetime, table: pa.Table) -> DecodedShapes:
    """The pre-fold of the hour's one events file, as a decode task does it (everything it
    supersedes counts: a task that wrote no winners superseded nothing), and the shapes."""
    shapes: Counter[tuple[Any, ...]] = Counter()
    for e in table.to_pylist():
        shapes[(e["db"], e["tbl"], e["op"], *shape_texts(e))] += 1
    fold = Prefold()
    values = ValueClasses()
    for batch in table.to_batches(max_chunksize=7):  # several batches, as a task's
        fold.add(batch)
        values.add(batch)
    sup = fold.finish()
    out = cfg.layout.winners(hour)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if sup is not None:
        sup.write_winners(
            cfg.layout.events(hour) / "part-00000.parquet", out / "part-00000.parquet"
        )
    return {
        "events_files": folder_files(cfg.layout.events(hour)),
        "shapes": [
            {"db": db, "tbl": tbl, "op": op, "n": n, **dict(zip(SHAPE_FIELDS, texts, strict=True))}  # type: ignore[typeddict-item]
            for (db, tbl, op, *texts), n in shapes.items()
        ],
        "winners_files": folder_files(out),
        "superseded": [
            {"db": db, "tbl": tbl, "op": op, "n": n}
            for (db, tbl, op), n in (sup.counts if sup else Counter()).items()
        ],
        "value_classes": [
            {"db": db, "tbl": tbl, "column": c, "cls": cls, "n": n}
            for (db, tbl, c, cls), n in values.counts.items()
        ],
    }


def state_tables(spark: Any, cfg: PipelineConfig) -> dict[str, list[tuple[Any, ...]]]:
    """Live rows per table from the merge state (sorted; rows as sorted (column, text) items)."""
    from pyspark.sql import functions as F

    from recon.merge.contributions import STATE_COLS as STATE_DDL_COLS
    from recon.merge.contributions import STATE_DDL
    from recon.merge.manifest import bucket_dirs, load_manifest
    from recon.merge.state import live_rows

    man = load_manifest(cfg)
    base = cfg.layout.merge
    dirs = [
        str(base / d)
        for t in man["tables"].values()
        for f in t["files"].values()
        for d in bucket_dirs(f)
    ]
    out: dict[str, list[tuple[Any, ...]]] = {t: [] for t in man["tables"]}
    if not dirs:
        return out
    ms = [n for n, t in man["tables"].items() if not t["schema"]["primary_key"]]
    state = spark.read.schema(STATE_DDL).parquet(*dirs)
    # a keyed table's key may have a row in a bucket's base and in its deltas: the newest is
    # its state row
    keyed = (
        state.where(~F.col("table").isin(ms))
        .groupBy("table", "key")
        .agg(F.max_by(F.struct(*STATE_DDL_COLS), F.struct("order_key", "sign")).alias("w"))
    )
    state = keyed.select("w.*").unionByName(state.where(F.col("table").isin(ms)))
    live = live_rows(state, ms)
    for r in live.select("table", "row").collect():
        row = tuple(sorted((k, v) for k, v in (r["row"] or {}).items() if v is not None))
        out[r["table"]].append(row)
    return {t: sorted(rows) for t, rows in out.items()}


# two small hours of s.a (the crash and application tests': kill, retry, compare)
HOUR0 = [event(i, "s.a", "insert", None, {"id": i, "v": f"v{i}"}, T, ["id"]) for i in range(1, 30)]
HOUR1 = [
    event(100, "s.a", "update", {"id": 3, "v": "v3"}, {"id": 3, "v": "changed"}, T, ["id"]),
    event(101, "s.a", "delete", {"id": 4, "v": "v4"}, None, T, ["id"]),
    event(102, "s.a", "insert", None, {"id": 50, "v": "new"}, T, ["id"]),
]


def bucket_records(cfg: PipelineConfig) -> dict[tuple[str, str], tuple[int, str]]:
    """Per (table, bucket) of the state in force: its rows and checksum."""
    man = load_manifest(cfg)
    return {
        (n, b): (int(f["rows"]), f["checksum"])
        for n, t in man["tables"].items()
        for b, f in t["files"].items()
    }


LAYOUT = ("snapshot_id", "files_added", "files_removed", "deletes_added")
"""What a publish result says of the files it wrote, which depends on the write merge-on-read
chose for the hour (from an estimate of the keys it changes, which the winners make closer:
a key of several ops was counted once per op)."""


def said(result: Any) -> dict[str, Any]:
    """What a merge result says of each table, but its own run's identity, the files its publish
    wrote, and the pre-fold."""
    out = {}
    for name, t in result["tables"].items():
        t = dict(t)
        t.pop("folded_in_decode", None)
        t.pop("checked_in_decode", None)
        t["published"] = {k: v for k, v in t["published"].items() if k not in LAYOUT}
        out[name] = t
    return out


KEYS = 80


def up(n: int, k: int, v: str, old: str) -> dict[str, Any]:
    return event(n, "s.a", "update", {"id": k, "v": old}, {"id": k, "v": v}, T)


def mor_hours() -> list[list[dict[str, Any]]]:
    """The merge-on-read tests' hours: hour 0 inserts 80 keys (and two keyless rows); hour 1 updates, deletes, moves a key and
    inserts new ones; hour 2 changes some of the same keys again and brings a late change
    older than the state; hour 3 changes more of them."""
    h0 = [event(k + 1, "s.a", "insert", None, {"id": k, "v": "a"}, T) for k in range(KEYS)]
    h0 += [event(100 + i, "s.b", "insert", None, {"id": i, "v": "x"}, T) for i in range(2)]
    h1 = [up(200 + k, k, "b", "a") for k in range(0, 8)]
    h1 += [event(220 + k, "s.a", "delete", {"id": k, "v": "a"}, None, T) for k in (10, 11)]
    h1 += [event(230, "s.a", "update", {"id": 12, "v": "a"}, {"id": 199, "v": "m"}, T)]
    h1 += [event(240 + k, "s.a", "insert", None, {"id": k, "v": "n"}, T) for k in (150, 151)]
    h1 += [event(250, "s.b", "insert", None, {"id": 9, "v": "y"}, T)]
    h2 = [up(300 + k, k, "c", "b") for k in range(0, 4)]
    h2 += [up(150, 5, "late", "a")]  # older than hour 1's change of key 5: stale
    h2 += [event(310, "s.a", "insert", None, {"id": 10, "v": "back"}, T)]  # deleted in hour 1
    h2 += [event(311, "s.a", "delete", {"id": 199, "v": "m"}, None, T)]
    h3 = [up(400 + k, k, "d", "c" if k < 4 else "a") for k in (1, 2, 20, 21, 22, 23, 24, 25)]
    return [h0, h1, h2, h3]


def delete_files(cfg: PipelineConfig) -> int:
    """The position-delete files the table's current version lists (in its delete manifests,
    whether or not a data file they apply to is left)."""
    table = load_table(cfg, "s.a")
    snap = table.current_snapshot()
    assert snap is not None
    return sum(
        1
        for m in snap.manifests(table.io)
        if m.content == ManifestContent.DELETES
        for _ in m.fetch_manifest_entry(table.io, discard_deleted=True)
    )
