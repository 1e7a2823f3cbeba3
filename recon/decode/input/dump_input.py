"""The decode tasks read an hour's Parquet dumps in place when they are in Kafka's order already.

A dumper that writes each Kafka partition's records in offset order (Spark's Kafka source: a
task per topic-partition range; Kafka Connect's S3 sink: a file per partition and offset range)
leaves the staging copy (`recon.decode.stage._staging_copy`) nothing to do but move every value
through a shuffle and a sort: ~3.8 s of a 500k-message DataWorks hour, ~5.8 s of a Debezium one
(2 cores). So a task per dump file first reads its small columns (`count_dump_files`): when its
records are in order (each partition's offsets rising, no null partition or offset, columns of
the types Spark's Kafka source writes, which need no cast), it counts each partition's records
and offset range. When every file is (and the files of a partition hold ranges apart, so no
offset is read twice in the hour, and few partitions share a file: `dumps_in_place`), the
decoders read each partition's records from the dumps themselves, the partitions packed
into a task per core (`dump_records`, `recon.decode.tasks.decode_tasks.packed`), and as they read
the values they count their bytes and write the offsets and content hashes for later hours,
as the copy's counters do (`recon.decode.input.copy_input.count_copy_files`). Otherwise the hour
takes the staging copy, as before (shuffled files, a record twice, JSON Lines dumps).

What the decoders get is what the copy would give them: `_read_parquet`'s Kafka timestamp in
milliseconds, computed the way Spark computes it (`spark_ts_ms`), and Spark's `xxhash64` of key
and value as the content hash (`content_hashes`); a test compares both with Spark's.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

from recon.core.model import HEADER_TYPE, OUTPUT_SCHEMA, RAW_SCHEMA, RawRecord
from recon.decode.formats.native import native_module
from recon.decode.input.copy_input import (
    HASHES_SCHEMA,
    HASHES_WRITE,
    TMP_PREFIX,
    SkipList,
    kept_rows,
)
from recon.decode.stream import BinaryRows, RawRun, native_column, records_from, run_columns
from recon.decode.tasks.task_files import GroupedParquet
from recon.faults import fail_once

_run_hashes = native_module("_run_hashes")

DUMP_TYPES = {
    "key": pa.binary(),
    "value": pa.binary(),
    "topic": pa.string(),
    "partition": pa.int32(),
    "offset": pa.int64(),
}
"""The columns a dump file read in place must have, of these types (Spark's Kafka source's)."""
VALUE_BYTES_STAT = "_input_value_bytes"
"""The decode tasks' stat row of a partition's value bytes read in place (`value_bytes_rows`);
the stage moves it to the partition's input counters."""
_MICROS = {"ms": 1_000, "us": 1}
"""Microseconds per unit of a Kafka timestamp read in place (nanoseconds: the copy reads it;
INT96 ones are read as microseconds: `open_dump`)."""
_BATCH_ROWS = 10_000
_KEY = RAW_SCHEMA.get_field_index("key")
"""The key's place in a raw record's columns (`run_columns`: RAW_SCHEMA's order)."""
_COUNT_ROWS = 100_000
"""Rows of the small columns a counters task reads at a time (a batch costs a few fixed
steps)."""
_XXH = xxhash.xxh64_intdigest
_SPARK_SEED = 42
DumpFile = tuple[str, str]
"""A dump file and the topic of its folder (a record whose topic is null is of that topic)."""
PartitionKey = tuple[str, int]
DumpSlice = tuple[int, str, int, tuple[tuple[str, str, bool], ...]]
"""A partition's records in the dumps: its number in the hour, topic, partition, and its files
in offset order, each with the topic of its folder and whether the partition is all the file
holds."""


def open_dump(path: str) -> pq.ParquetFile:
    """A dump file, its INT96 timestamps (Spark's default for a timestamp it writes) read as
    microseconds, as Spark reads them (nanoseconds overflow past 2262)."""
    return pq.ParquetFile(path, coerce_int96_timestamp_unit="us")


def _int96_timestamp(pf: pq.ParquetFile) -> bool:
    cols = (pf.schema.column(i) for i in range(len(pf.schema)))
    return any(c.path == "timestamp" and c.physical_type == "INT96" for c in cols)


def readable_in_place(schema: pa.Schema, int96: bool = False) -> bool:
    """True when a dump file of `schema` reads as `recon.decode.input.dumps._read_parquet` reads it
    without a cast: the Kafka source's columns and types, a timestamp (if any) of an instant
    in milliseconds or microseconds (`int96`: an INT96 one, an instant too, read by
    `open_dump`; not a time with no zone, which Spark reads as a local time), headers (if
    any) of the raw record's type."""
    names = schema.names
    if any(names.count(n) > 1 for n in names):
        return False
    for name, typ in DUMP_TYPES.items():
        if name not in names or schema.field(name).type != typ:
            return False
    if "timestamp" in names:
        ts = schema.field("timestamp").type
        if not (pa.types.is_timestamp(ts) and ts.unit in _MICROS):
            return False
        if ts.tz is None and not (int96 and ts.unit == "us"):
            return False
    return "headers" not in names or schema.field("headers").type == HEADER_TYPE


_INT96_SAFE_MICROS = -2_208_988_800_000_000
"""1900-01-01 UTC: Spark reads an INT96 time before it by its calendar settings (a rebase, or
an error), so such a dump takes the staging copy, read by Spark."""


def _int96_before_1900(batch: pa.RecordBatch) -> bool:
    lo = pc.min(batch.column("timestamp").cast(pa.int64())).as_py()
    return lo is not None and lo < _INT96_SAFE_MICROS


def spark_ts_ms(ts: pa.Array) -> pa.Array:
    """Kafka timestamps in epoch milliseconds as `_read_parquet` has Spark compute them: the
    instant in microseconds, as seconds in a double, times 1000, truncated to a long (so a
    millisecond a double cannot hold exactly may come out one less, in both paths)."""
    assert isinstance(ts.type, pa.TimestampType)
    micros = pc.multiply_checked(ts.cast(pa.int64()), _MICROS[ts.type.unit])
    seconds = pc.divide(micros.cast(pa.float64(), safe=False), 1_000_000.0)
    return pc.multiply(seconds, 1000.0).cast(pa.int64(), safe=False)


def _hash(key: bytes | None, value: bytes | None) -> int:
    h = _SPARK_SEED if key is None else _XXH(key, _SPARK_SEED)
    return h if value is None else _XXH(value, h)


def content_hashes(key: pa.Array, value: pa.Array) -> pa.Array:
    """Spark's `xxhash64(key, value)` of each record: each column hashed with the hash so far
    as the seed (42 to begin), a null one left out; as Spark's signed long."""
    return _hashes(BinaryRows(key), BinaryRows(value))


def _hashes(keys: Sequence[bytes | None], values: Sequence[bytes | None]) -> pa.Array:
    """`content_hashes` of a run's keys and values (lists, or `BinaryRows`): in C where it is
    built (`_run_hashes.c`, from the Arrow buffers: ~4x faster than a call per record)."""
    if _run_hashes is not None:
        got = _run_hashes.hashes(native_column(keys), native_column(values), _SPARK_SEED)
        return pa.array(np.frombuffer(got, np.int64))
    return pa.array(np.fromiter(map(_hash, keys, values), np.uint64, len(keys)).view(np.int64))


def _partition_rows(raw: pa.RecordBatch, topic: str, partition: int) -> np.ndarray:
    """The numbers of the rows of (topic, partition) in a raw batch."""
    mine = pc.and_(
        pc.equal(raw.column("topic"), topic), pc.equal(raw.column("partition"), partition)
    )
    return np.flatnonzero(pc.fill_null(mine, False).to_numpy(zero_copy_only=False))


def _topics(batch: pa.RecordBatch, topic: str) -> pa.Array:
    """The batch's topics, the folder's where one is null."""
    got = batch.column("topic")
    return pc.fill_null(got, topic) if got.null_count else got


def _columns(pf: pq.ParquetFile) -> list[str]:
    return [c for c in (*DUMP_TYPES, "timestamp", "headers") if c in pf.schema_arrow.names]


def _count_batch(batch: pa.Table, found: dict[PartitionKey, dict[str, int]]) -> bool:
    """Add a batch of a dump file (columns t, p, o) to `found`, the records and offset range of
    each (topic, partition) in the batches before; False when a partition's offsets do not
    rise, in the batch or from its batches before."""
    order = pc.sort_indices(batch, [("t", "ascending"), ("p", "ascending")])  # a stable sort
    s = batch.take(order)
    t, p = s["t"].to_numpy(zero_copy_only=False), s["p"].to_numpy()
    o = s["o"].to_numpy()
    same = (t[1:] == t[:-1]) & (p[1:] == p[:-1])
    if not np.all(o[1:][same] > o[:-1][same]):
        return False
    sums = batch.group_by(["t", "p"], use_threads=False).aggregate(
        [([], "count_all"), ("o", "min"), ("o", "max")]
    )
    for t0, p0, n, lo, hi in zip(*sums.to_pydict().values(), strict=True):
        got = found.setdefault((t0, p0), {"records": 0, "min_offset": lo, "max_offset": lo - 1})
        if lo <= got["max_offset"]:
            return False
        got["records"] += n
        got["max_offset"] = hi
    return True


def _count_file(path: str, topic: str) -> dict[PartitionKey, dict[str, int]] | None:
    """The records and offset range of one dump file per (topic, partition), from its small
    columns; None when it cannot be read in place."""
    pf = open_dump(path)
    int96 = _int96_timestamp(pf)
    if not readable_in_place(pf.schema_arrow, int96):
        return None
    found: dict[PartitionKey, dict[str, int]] = {}
    cols = ["topic", "partition", "offset", *(["timestamp"] if int96 else [])]
    for batch in pf.iter_batches(_COUNT_ROWS, columns=cols):
        if not batch.num_rows:
            continue
        part, off = batch.column("partition"), batch.column("offset")
        if part.null_count or off.null_count or (int96 and _int96_before_1900(batch)):
            return None
        if not _count_batch(pa.table({"t": _topics(batch, topic), "p": part, "o": off}), found):
            return None
    return found


def count_dump_files(items: Iterable[DumpFile]) -> Iterator[dict]:
    """Inside a task: each dump file given (path, its folder's topic), from its small
    columns: a row per (topic, partition) it holds, with its records and lowest and highest
    offset, if it can be read in place; or else a row with `in_order` False. (The value
    bytes, offsets and content hashes are counted as the decoders read the values anyway:
    `dump_records`.)"""
    for path, topic in items:
        found = _count_file(path, topic)
        if found is None:
            yield {"file": path, "in_order": False}
            continue
        for (t, p), got in found.items():
            yield {"file": path, "topic_of_folder": topic, "in_order": True, "topic": t,
                   "partition": p, **got}  # fmt: skip


def _raw_batch(batch: pa.RecordBatch, topic: str) -> pa.RecordBatch:
    """A dump file's batch as raw records (`RAW_SCHEMA`), as `_read_parquet` reads it."""
    n = batch.num_rows
    names = batch.schema.names
    ts = spark_ts_ms(batch.column("timestamp")) if "timestamp" in names else pa.nulls(n, pa.int64())
    headers = batch.column("headers") if "headers" in names else pa.nulls(n, HEADER_TYPE)
    cols = [_topics(batch, topic), batch.column("partition"),
            batch.column("offset"), batch.column("key"), batch.column("value"), ts, headers,
            pa.nulls(n, pa.bool_()), pa.nulls(n, pa.int32())]  # fmt: skip
    return pa.RecordBatch.from_arrays(cols, schema=RAW_SCHEMA)


_HASH_GROUP_BYTES = 4 * 1024 * 1024
"""Offsets and hashes a partition's hashes file holds a row group of (~150k rows), not one
per batch read (a row group costs its writer ~0.3 ms, and its readers again)."""


def dump_records(
    part: DumpSlice,
    skip: SkipList,
    hashes_out: str,
    value_bytes: dict[PartitionKey, int],
    runs: bool = False,
) -> Iterator[RawRecord | RawRun]:
    """Inside a decode task: one partition's records from the dumps, in offset order (its
    files in order, each rising: `count_dump_files` checked), less those in `skip`. As they
    are read, their offsets and content hashes go to `hashes_out` (a file per partition,
    written aside and renamed once the partition is read: a retried task writes it again,
    whole), and their value bytes to `value_bytes`. `runs`: a batch's records with none to
    skip as one `RawRun` (for `recon.decode.stream.decode_raw`)."""
    n, topic, partition, files = part
    offsets = pa.array(sorted({o for o, _ in skip.get((topic, partition), ())}), pa.int64())
    name = f"{n:05d}.parquet"
    aside = os.path.join(hashes_out, f"{TMP_PREFIX}{uuid.uuid4().hex}-{name}")
    total = 0
    os.makedirs(hashes_out, exist_ok=True)
    with GroupedParquet(aside, HASHES_SCHEMA, HASHES_WRITE, _HASH_GROUP_BYTES) as written:
        for path, folder_topic, alone in files:
            pf = open_dump(path)
            for batch in pf.iter_batches(_BATCH_ROWS, columns=_columns(pf)):
                raw = _raw_batch(batch, folder_topic)
                # the partition's rows, their values read in place (not a filtered copy)
                rows = None if alone else _partition_rows(raw, topic, partition)
                values = BinaryRows(raw.column("value"), rows)
                lengths = pc.binary_length(raw.column("value"))
                raw = raw.drop_columns(["value"])
                if rows is not None:
                    raw, lengths = raw.take(rows), lengths.take(rows)
                cols = run_columns(raw, values)
                hashes = _hashes(cols[_KEY], values)
                offsets_of = [raw.column(c) for c in ("topic", "partition", "offset")]
                written.add(pa.record_batch([*offsets_of, hashes], schema=HASHES_SCHEMA))
                total += pc.sum(lengths).as_py() or 0
                if runs and not len(offsets):
                    yield RawRun(cols)
                    continue
                records = records_from(cols)
                if len(offsets):

                    def hashes_at(at: list[int], hashes: pa.Array = hashes) -> list[int]:
                        return hashes.take(at).to_pylist()

                    keep = kept_rows(raw, skip, offsets, hashes_at).to_pylist()
                    records = itertools.compress(records, keep)
                yield from records
    fail_once("decode:hashes-written-aside")  # retry tests: an attempt's file aside
    os.replace(aside, os.path.join(hashes_out, name))
    value_bytes[(topic, partition)] = total


def value_bytes_rows(value_bytes: dict[PartitionKey, int]) -> Iterator[pa.RecordBatch]:
    """The value bytes `dump_records` counted, as the decode output's stat rows (called once
    the records are read)."""
    rows = [{"kind": "stat", "topic": t, "partition": p, "stat": VALUE_BYTES_STAT, "n": n}
            for (t, p), n in sorted(value_bytes.items())]  # fmt: skip
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=OUTPUT_SCHEMA)


_MAX_READS = 2.0
"""A partition's decoder reads each file that holds it whole, the other partitions' rows left
out: read in place only when that reads the hour's records at most this many times over (two
partitions a file, say); more partitions interleaved in each file take the staging copy."""


def dumps_in_place(
    rows: list[dict[str, Any]],
) -> tuple[dict[PartitionKey, dict[str, int]], list[DumpSlice]] | None:
    """The input counters per (topic, partition) and the decoders' partitions, each with its
    files in offset order, from `count_dump_files`' rows; None when the hour cannot be read in
    place: a file is not in order, two files of a partition hold ranges that meet (an offset
    may be in both: the staging copy sorts that out), or too many partitions share files."""
    if not all(r["in_order"] for r in rows):
        return None
    parts_of: dict[str, set[PartitionKey]] = {}
    records_of_file: dict[str, int] = {}
    by_part: dict[PartitionKey, list[dict[str, Any]]] = {}
    for r in rows:
        parts_of.setdefault(r["file"], set()).add((r["topic"], r["partition"]))
        records_of_file[r["file"]] = records_of_file.get(r["file"], 0) + r["records"]
        by_part.setdefault((r["topic"], r["partition"]), []).append(r)
    reads = sum(records_of_file[r["file"]] for r in rows)
    if reads > _MAX_READS * sum(records_of_file.values()):
        return None
    stats: dict[PartitionKey, dict[str, int]] = {}
    slices: list[DumpSlice] = []
    for key, got in sorted(by_part.items()):
        got.sort(key=lambda r: r["min_offset"])
        if any(a["max_offset"] >= b["min_offset"] for a, b in itertools.pairwise(got)):
            return None
        n = sum(r["records"] for r in got)
        # the value bytes: counted by the decoders (`dump_records`)
        lo, hi = got[0]["min_offset"], got[-1]["max_offset"]
        stats[key] = {"records": n, "distinct": n, "distinct_offsets": n, "bytes": 0,
                      "min_offset": lo, "max_offset": hi}  # fmt: skip
        files = tuple((r["file"], r["topic_of_folder"], parts_of[r["file"]] == {key}) for r in got)
        slices.append((len(slices), key[0], key[1], files))
    return stats, slices
