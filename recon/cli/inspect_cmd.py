"""`recon inspect PATH` and `recon init --raw PATH --out FILE`: what `recon.ops.inspect` found,
printed for a person, or written as a commented pipeline YAML."""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from recon.errors import ReconError
from recon.formats import FORMATS
from recon.layout import shipped
from recon.rawdumps import KAFKA_CONNECT_S3

if TYPE_CHECKING:  # read when the command runs (pyarrow, the decoders)
    from recon.ops.inspect import RawInfo, SnapshotInfo, TopicInfo

SCHEMA = shipped("docs/reference/pipeline.schema.json")


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect",
        help="show what a raw dump folder, one dump file or a snapshot folder holds (sampled)",
    )
    p.add_argument(
        "path", metavar="PATH", help="a raw folder, a topic's folder, a file or a snapshot"
    )
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("init", help="write a commented pipeline YAML from what inspect finds")
    p.add_argument("--raw", required=True, metavar="PATH", help="the raw dump folder")
    p.add_argument("--snapshot", metavar="PATH", help="the snapshot folder (with _watermark.json)")
    p.add_argument(
        "--out", required=True, metavar="FILE", help="the YAML to write, e.g. pipelines/shop.yaml"
    )
    p.add_argument("--name", help="the pipeline's name (default: the file's name)")
    p.add_argument(
        "--warehouse", metavar="DIR", help="its state and tables (default: warehouse/ beside --raw)"
    )
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.set_defaults(func=cmd_init)


def cmd_inspect(args: argparse.Namespace) -> int:
    from recon.ops.inspect import file_info, inspect_raw, inspect_snapshot, is_snapshot

    path = Path(args.path)
    if path.is_file():
        _print_topic(file_info(path), f"file {path}")
    elif is_snapshot(path):
        _print_snapshot(inspect_snapshot(path))
    else:
        _print_raw(inspect_raw(path))
    return 0


def _print_raw(info: RawInfo) -> None:
    print(f"raw folder: {info.raw_path}")
    layout = info.dump.layout
    if layout == KAFKA_CONNECT_S3:
        print(f'layout:     {layout}, path_format "{info.dump.path_format}"')
    else:
        print(f"layout:     {layout} (<topic>/dt=YYYY-MM-DD/hour=HH/part-*, _SUCCESS per hour)")
    for t in info.topics:
        first = f"{t.hours[0]:%Y-%m-%dT%H}" if t.hours else "-"
        last = f"{t.hours[-1]:%Y-%m-%dT%H}" if t.hours else "-"
        print()
        _print_topic(t, f"topic {t.topic}: {len(t.hours)} hours, {first} .. {last}")


def _print_topic(t: TopicInfo, title: str) -> None:
    print(title)
    if t.partitions:
        print("  partition  first offset   last offset   records   (the newest hours)")
        for p in sorted(t.partitions.values(), key=lambda p: p.partition):
            print(f"  {p.partition:>9}  {p.first_offset:>12}  {p.last_offset:>12}  {p.records:>8}")
    tried = ", ".join(f"{f} {u}/{b}" for f, (u, b) in t.tried.items())
    if t.format:
        print(f"  format: {t.format} (records decoded/quarantined per format tried: {tried})")
    else:
        print(f"  format: none of {', '.join(FORMATS)} reads the sample ({tried})")
    for name, tab in sorted(t.tables.items()):
        ops = ", ".join(f"{op} {n}" for op, n in sorted(tab.changes.items()))
        key = f"key ({', '.join(tab.key)})" if tab.key else "no key stated"
        print(f"  table {name}: {ops}; {key}")
    for bad in t.unreadable[:5]:
        print(f"  unreadable file: {bad}")
    for reason, n in t.reasons.most_common(3):
        print(f"  quarantined in the sample ({n}): {reason}")
    for e in t.events:
        row = e.after if e.after is not None else e.before
        print(f"  event {e.op} {e.db}.{e.tbl} @ {e.topic}[{e.partition}]:{e.offset} {row}")


def _print_snapshot(s: SnapshotInfo) -> None:
    print(f"snapshot: {s.path}")
    print(f"  watermark: {s.watermark}")
    for name, rows in s.tables.items():
        print(f"  table {name}: {rows if rows >= 0 else 'unreadable'} rows")


def cmd_init(args: argparse.Namespace) -> int:
    from recon.ops.inspect import InspectError, inspect_raw, inspect_snapshot

    out = Path(args.out)
    if out.exists() and not args.force:
        raise ReconError(f"{out}: exists; pass --force to replace it, or another --out")
    raw = Path(args.raw)
    if not raw.is_dir() or not os.access(raw, os.R_OK | os.X_OK):
        raise InspectError(f"{raw}: not a readable folder; give the folder the dumps are under")
    info = inspect_raw(raw)
    found = [t for t in info.topics if t.format]
    if not found:
        raise InspectError(f"{raw}: no topic's records read as any format ({', '.join(FORMATS)})")
    fmts = {t.format for t in found}
    fmt = max(fmts, key=lambda f: sum(1 for t in found if t.format == f))
    snap = inspect_snapshot(Path(args.snapshot)) if args.snapshot else None
    name = args.name or _name(out.stem)
    warehouse = Path(args.warehouse) if args.warehouse else info.raw_path.parent / "warehouse"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_yaml(name, fmt, info, found, snap, warehouse, out))
    print(f"wrote {out}: check it, then `recon validate {out}`")
    return 0


def _q(path: Path) -> str:
    """An absolute path as a YAML (JSON) string: the YAML may be moved, its paths stay."""
    return json.dumps(str(path.resolve()))


def _name(stem: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in stem.lower()) or "pipeline"


def render_yaml(
    name: str,
    fmt: str | None,
    info: RawInfo,
    topics: list[TopicInfo],
    snap: SnapshotInfo | None,
    warehouse: Path,
    out: Path,
) -> str:
    chosen = [t for t in topics if t.format == fmt]
    hours = sorted(h for t in chosen for h in t.hours)
    start = hours[0] if hours else datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    schema = os.path.relpath(SCHEMA, out.resolve().parent)
    lines = [
        f"# yaml-language-server: $schema={schema}",
        f"# Written by `recon init` from {info.raw_path} on {datetime.now(UTC):%Y-%m-%d}.",
        "# Check every line, then: recon validate <this file>. Reference: docs/reference/pipeline.md",
        f"name: {name}  # its DAG is recon_{name}",
        f"format: {fmt}  # found by decoding a sample of each topic's newest hour",
        f"raw_path: {_q(info.raw_path)}",
        f"topics: [{', '.join(t.topic for t in chosen)}]",
        f"warehouse: {_q(warehouse)}  # state, tables, reports: a folder Airflow and Spark share",
        f"start: {start:%Y-%m-%dT%H}:00:00Z  # the first hour found in the dumps",
    ]
    if info.dump.layout == KAFKA_CONNECT_S3:
        lines += [
            "dump:",
            f"  layout: {KAFKA_CONNECT_S3}",
            f'  path_format: "{info.dump.path_format}"  # the connector\'s path.format',
        ]
    if snap is not None:
        lines.append(
            f"snapshot: {{path: {_q(snap.path)}}}  # watermark {json.dumps(snap.watermark)}"
        )
    lines.append("tables:")
    tables = _table_lines(chosen, snap)
    if not tables:
        raise ReconError(f"{info.raw_path}: the sample names no table; is it a CDC topic?")
    lines += list(tables.values())
    lines += [
        "audit:",
        "  # findings that fail an hour (docs/operations.md lists every kind)",
        "  fail_on: [offset_gap, quarantined, reconcile_mismatch, open_transaction, unread_file]",
    ]
    return "\n".join(lines) + "\n"


def _table_lines(chosen: list[TopicInfo], snap: SnapshotInfo | None) -> dict[str, str]:
    """Each table's line under `tables:`, with what the sample said of it."""
    tables: dict[str, str] = {}
    for t in chosen:
        for tname, tab in sorted(t.tables.items()):
            changes = sum(tab.changes.values())
            key = (
                f"key ({', '.join(tab.key)}) from the messages"
                if tab.key
                else "the sample states no key: add primary_key: [...]"
            )
            tables.setdefault(tname, f"  {tname}: {{}}  # {changes} changes in the sample; {key}")
        for tname in t.unnamed:
            tables.setdefault(
                tname,
                f"  {tname}: {{}}  # its messages name no columns: give columns: [...] or "
                'ddl: "CREATE TABLE ..."',
            )
    for tname in sorted(snap.tables if snap else []):
        tables.setdefault(tname, f"  {tname}: {{}}  # in the snapshot only")
    return tables
