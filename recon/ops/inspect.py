"""`recon inspect` and `recon init`: what a folder of dumps (or one dump file, or a snapshot) holds,
from samples, never a full decode; and a pipeline YAML written from it.

A raw folder is read as either layout (`recon.rawdumps`): Spark-Kafka's `dt=/hour=` folders,
or Kafka Connect files `<topic>+<partition>+<offset>.<ext>`, whose folders give the connector's
`path.format`. Per topic: its hours, and of the newest `SAMPLE_HOURS` hours each partition's
offsets and records (from Parquet footers and small columns, Avro block counts, line counts).
The format is found by feeding the newest hour's first `SAMPLE_RECORDS` records of each
partition to every decoder: the one that decodes the most records to events or control records
(and quarantines the fewest) is it. Its events give the tables, their change counts and keys.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from recon.core.model import Event, RawRecord
from recon.decode.base import DecodeContext, Sink, StreamDecoder
from recon.decode.input.connect_input import ConnectFileError, avro_records, file_values
from recon.errors import ReconError
from recon.formats import FORMAT_SPECS, FORMATS, load_object
from recon.rawdumps import (
    KAFKA_CONNECT_S3,
    SPARK_KAFKA,
    SPARK_KAFKA_DUMP,
    DumpConfig,
    connect_name,
    scan_topic,
)

SAMPLE_HOURS = 3
SAMPLE_RECORDS = 200
_WALK_LIMIT = 5_000
"""Folders a layout search looks at before it gives up (a large folder is sampled, not read)."""


_CONNECT = DumpConfig(KAFKA_CONNECT_S3)


class InspectError(ReconError):
    """Nothing readable at the path: one line naming what was tried and found."""


@dataclass
class PartitionInfo:
    partition: int
    first_offset: int | None = None
    last_offset: int | None = None
    records: int = 0


@dataclass
class TableInfo:
    changes: Counter[str] = field(default_factory=Counter)
    key: tuple[str, ...] = ()


@dataclass
class TopicInfo:
    topic: str
    hours: list[datetime]
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    format: str | None = None
    tried: dict[str, tuple[int, int]] = field(default_factory=dict)
    """format -> (records decoded, records quarantined) of the sample."""
    tables: dict[str, TableInfo] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    """The sample's quarantine reasons in the format found."""
    unnamed: list[str] = field(default_factory=list)
    """Tables whose messages name no columns (the config must: `columns:` or `ddl:`)."""
    unreadable: list[str] = field(default_factory=list)
    """Files of the sample that could not be read, each with why."""


@dataclass
class RawInfo:
    raw_path: Path
    dump: DumpConfig
    topics: list[TopicInfo]


@dataclass
class SnapshotInfo:
    path: Path
    watermark: dict[str, Any]
    tables: dict[str, int]
    """db.table -> rows (Parquet footers, lines; -1 where a file could not be read)."""


# -- finding the layout ------------------------------------------------------------------------
_HOUR_DIR = re.compile(r"^dt=\d{4}-\d{2}-\d{2}$")
_CONNECT_FILE = re.compile(r"^(.+)\+\d{1,9}\+\d{1,19}\.(avro|bin|json)(\.gz)?$")


def find_layout(path: Path) -> tuple[Path, DumpConfig, list[str]]:
    """(raw_path, layout, topics) of a raw folder, or of one topic's folder; InspectError
    naming the layouts tried and what was found when it is neither."""
    if not path.is_dir():
        raise InspectError(
            f"{path}: no such folder or file; give a raw dump folder, a dump file or a snapshot folder"
        )
    for base, topics in ((path, _children(path)), (path.parent, [path.name])):
        spark_topics = [t for t in topics if any(_HOUR_DIR.match(c) for c in _children(base / t))]
        if spark_topics:
            return base, SPARK_KAFKA_DUMP, sorted(spark_topics)
    found = _connect_files(path)
    if found:
        topic_dirs: dict[str, Path] = {}
        for f in found:
            m = _CONNECT_FILE.match(f.name)
            assert m is not None
            topic = m.group(1)
            d = next((p for p in f.parents if p.name == topic), None)
            if d is not None:
                topic_dirs.setdefault(topic, d)
        if topic_dirs:
            topic, tdir = sorted(topic_dirs.items())[0]
            sample = next(f for f in found if f.name.startswith(f"{topic}+"))
            fmt = path_format_of(sample.parent.relative_to(tdir).as_posix())
            raw = tdir.parent
            topics = (
                [path.name]  # one topic's folder
                if path.name in topic_dirs and topic_dirs[path.name] == path
                else sorted(t for t in _children(raw) if _holds_connect_files(raw / t, t))
            )
            return raw, DumpConfig(KAFKA_CONNECT_S3, fmt), topics
    seen = ", ".join(sorted(_children(path))[:5]) or "nothing"
    raise InspectError(
        f"{path}: no dumps found; tried {SPARK_KAFKA} (<topic>/dt=YYYY-MM-DD/hour=HH/part-*) and "
        f"{KAFKA_CONNECT_S3} (<topic>/<path.format>/<topic>+<partition>+<offset>.avro|bin|json), "
        f"found {seen}"
    )


def _children(folder: Path) -> list[str]:
    try:
        return [e.name for e in os.scandir(folder) if e.is_dir()]
    except OSError:
        return []


def _holds_connect_files(folder: Path, topic: str) -> bool:
    for i, (_, _, names) in enumerate(os.walk(folder)):
        if any(connect_name(topic, n) for n in names):
            return True
        if i > _WALK_LIMIT:
            break
    return False


def _connect_files(path: Path) -> list[Path]:
    out: list[Path] = []
    for i, (folder, _, names) in enumerate(os.walk(path)):
        out.extend(Path(folder) / n for n in names if _CONNECT_FILE.match(n))
        if len(out) >= 20 or i > _WALK_LIMIT:
            break
    return out


def path_format_of(rel: str) -> str:
    """The connector's path.format (Joda) of one hour folder's path, e.g. `year=2026/month=11/
    day=20/hour=05` -> `'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH`: digits are the fields in
    order (year, month, day, hour), anything else quoted text."""
    fields = iter(["YYYY", "MM", "dd", "HH"])
    out: list[str] = []
    for m in re.finditer(r"\d+|[^\d]+", rel):
        text = m.group(0)
        if text.isdigit():
            out.append(next(fields, text))
        else:
            out.append("".join(c if c in "/-_=." else f"'{c}'" for c in text).replace("''", ""))
    return "".join(out)


# -- reading samples ---------------------------------------------------------------------------
def sample_records(
    path: Path, topic: str, limit: int = SAMPLE_RECORDS, dump: DumpConfig = _CONNECT
) -> list[RawRecord]:
    """The first `limit` records of one dump file (any layout), in file order."""
    name = path.name
    found = connect_name(topic, name)
    if found is not None:
        p, start, _ = found
        out = []
        for i, v in enumerate(file_values(path, dump)):
            if i >= limit:
                break
            out.append(RawRecord(topic, p, start + i, None, v))
        return out
    if name.endswith(".parquet"):
        pf = pq.ParquetFile(path)
        cols = [
            c
            for c in ("topic", "partition", "offset", "key", "value")
            if c in pf.schema_arrow.names
        ]
        batch = next(pf.iter_batches(batch_size=limit, columns=cols), None)
        rows = batch.to_pylist() if batch is not None else []
        return [
            RawRecord(
                r.get("topic") or topic,
                r.get("partition") or 0,
                r.get("offset") or 0,
                r.get("key"),
                r.get("value"),
            )
            for r in rows
        ]
    if ".jsonl" in name:
        opener: Any = gzip.open if name.endswith(".gz") else open
        out = []
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                if len(out) >= limit:
                    break
                try:
                    j = json.loads(line)
                    v = j.get("value")
                    k = j.get("key")
                    out.append(
                        RawRecord(
                            j.get("topic") or topic,
                            int(j["partition"]),
                            int(j["offset"]),
                            None if k is None else base64.b64decode(k),
                            None if v is None else base64.b64decode(v),
                        )
                    )
                except (ValueError, KeyError, TypeError):
                    continue
        return out
    return []


def partition_counts(files: list[Path], topic: str, into: dict[int, PartitionInfo]) -> None:
    """Each partition's offsets and records in `files`, from what is cheap to read."""
    for f in files:
        found = connect_name(topic, f.name)
        if found is not None:
            n = _connect_count(f)
            _add(into, found[0], found[1], found[1] + n - 1, n)
        elif f.name.endswith(".parquet"):
            try:
                t = pq.read_table(f, columns=["partition", "offset"])
            except (OSError, ValueError):
                continue
            for p, offsets in _group(
                t.column("partition").to_pylist(), t.column("offset").to_pylist()
            ).items():
                _add(into, p, min(offsets), max(offsets), len(offsets))
        else:
            recs = sample_records(f, topic, limit=10**9)
            groups = _group([r.partition for r in recs], [r.offset for r in recs])
            for p, offsets in groups.items():
                _add(into, p, min(offsets), max(offsets), len(offsets))


def _connect_count(f: Path) -> int:
    """Records in a connector file: an Avro file's block counts, else its values counted."""
    if f.name.endswith(".avro"):
        return avro_records(f, 1 << 62)
    try:
        return sum(1 for _ in file_values(f, _CONNECT))
    except ConnectFileError:
        return 0


def _group(parts: list[Any], offsets: list[Any]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for p, o in zip(parts, offsets, strict=True):
        if p is not None and o is not None:
            out.setdefault(int(p), []).append(int(o))
    return out


def _add(into: dict[int, PartitionInfo], p: int, lo: int, hi: int, n: int) -> None:
    info = into.setdefault(p, PartitionInfo(p))
    info.first_offset = lo if info.first_offset is None else min(info.first_offset, lo)
    info.last_offset = hi if info.last_offset is None else max(info.last_offset, hi)
    info.records += n


# -- finding the format --------------------------------------------------------------------------
def try_formats(
    records: list[RawRecord], formats: tuple[str, ...] = FORMATS
) -> dict[str, tuple[int, int, Sink]]:
    """format -> (records used, records quarantined, its sink) of the sample, fed per partition
    in offset order."""
    by_part: dict[int, list[RawRecord]] = {}
    for r in records:
        by_part.setdefault(r.partition, []).append(r)
    out = {}
    for fmt in formats:
        cls: type[StreamDecoder] = load_object(FORMAT_SPECS[fmt].decoder)
        sink = Sink()
        crashed = 0
        for recs in by_part.values():
            dec = cls(DecodeContext(), sink)
            for r in sorted(recs, key=lambda r: r.offset):
                try:
                    dec.feed(r)
                except Exception:  # noqa: BLE001 - a decoder fed another format's bytes
                    crashed += 1
            try:
                dec.finish()
            except Exception:  # noqa: BLE001 - as above
                crashed += 1
        bad = len(sink.quarantine) + crashed
        out[fmt] = (len(records) - bad, bad, sink)
    return out


def inspect_raw(path: Path, hours: int = SAMPLE_HOURS) -> RawInfo:
    raw, dump, topics = find_layout(path)
    infos = []
    for topic in topics:
        found = scan_topic(raw, topic, dump)
        info = TopicInfo(topic, list(found))
        newest = list(found)[-hours:]
        for h in newest:
            partition_counts([Path(f) for f in found[h]], topic, info.partitions)
        if newest:
            records = _sample_hour([Path(f) for f in found[newest[-1]]], topic, info.unreadable)
            tried = try_formats(records)
            best = max(tried, key=lambda f: (tried[f][0] - tried[f][1], -FORMATS.index(f)))
            info.tried = {f: (u, b) for f, (u, b, _) in tried.items()}
            if tried[best][0] > 0:
                info.format = best
                _tables(info, tried[best][2])
        infos.append(info)
    return RawInfo(raw, dump, infos)


def _sample_hour(files: list[Path], topic: str, unreadable: list[str]) -> list[RawRecord]:
    """The first records of each file; a file that cannot be read is named in `unreadable`
    with why (the decode would stop on it, or quarantine its lines)."""
    out: list[RawRecord] = []
    for f in files:
        try:
            out.extend(sample_records(f, topic))
        except ConnectFileError as err:
            unreadable.append(str(err))
        except (OSError, ValueError) as err:
            unreadable.append(f"{f}: {err}")
    return out


_NO_COLUMNS = re.compile(r"no column names known for (\S+?): ")


def _tables(info: TopicInfo, sink: Sink) -> None:
    events = sink.events
    info.reasons = Counter(reason for _, reason, _ in sink.quarantine)
    for reason in info.reasons:
        m = _NO_COLUMNS.search(reason)
        if m and m.group(1) not in info.unnamed:
            info.unnamed.append(m.group(1))
    for e in events:
        if e.op == "ddl" or not e.tbl:
            continue
        t = info.tables.setdefault(f"{e.db}.{e.tbl}", TableInfo())
        t.changes[str(e.op)] += 1
        if e.pk and not t.key:
            t.key = tuple(e.pk)
    info.events = [e for e in events if e.op != "ddl"][:3]


def inspect_snapshot(path: Path) -> SnapshotInfo:
    wm_file = path / "_watermark.json"
    try:
        wm = json.loads(wm_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InspectError(f"{wm_file}: not readable JSON ({err}); fix or rewrite it") from None
    tables = {}
    for d in sorted(p for p in path.iterdir() if p.is_dir() and "." in p.name):
        tables[d.name] = sum(
            _rows(f) for f in d.iterdir() if f.is_file() and not f.name.startswith(("_", "."))
        )
    return SnapshotInfo(path, wm if isinstance(wm, dict) else {}, tables)


def _rows(f: Path) -> int:
    try:
        if f.suffix == ".parquet":
            return int(pq.read_metadata(f).num_rows)
        with open(f, "rb") as fh:
            n = sum(1 for line in fh if line.strip())
        return n - 1 if f.suffix == ".csv" else n
    except (OSError, ValueError):
        return -1


def is_snapshot(path: Path) -> bool:
    return (path / "_watermark.json").is_file()


def file_info(path: Path) -> TopicInfo:
    """One dump file: its records' partitions and offsets, the format and a few events."""
    topic = _topic_of(path)
    info = TopicInfo(topic, [])
    partition_counts([path], topic, info.partitions)
    records = sample_records(path, topic)
    tried = try_formats(records)
    info.tried = {f: (u, b) for f, (u, b, _) in tried.items()}
    best = max(tried, key=lambda f: (tried[f][0] - tried[f][1], -FORMATS.index(f)))
    if tried[best][0] > 0:
        info.format = best
        _tables(info, tried[best][2])
    return info


def _topic_of(path: Path) -> str:
    m = _CONNECT_FILE.match(path.name)
    if m:
        return m.group(1)
    for p in path.parents:
        if _HOUR_DIR.match(p.name):
            return p.parent.name
    return path.parent.name
