"""The decode tasks read their input themselves, from the hour's staging copy (unless its dumps
are in Kafka's order already: `recon.decode.input.dump_input`).

The staging copy (`recon.decode.stage._staging_copy`) is written partitioned by Kafka partition
(topic, partition) and sorted by offset (then content hash and Kafka timestamp) within it: a
partition's records are in one file, in the order its decoder needs (a file may hold several
partitions, one after the other: adaptive execution packs small ones into one task). So a decode
task can take a file, read it with Arrow a row group at a time, and decode it, instead of Spark
reading the copy, shuffling it a second time by partition, sorting it, and handing it to Python
(measured on 2 cores, a 500k-message DataWorks hour: that shuffle and hand-over cost ~4.5 of the
decoders' ~10 s job). A later copy of a record in the hour (same offset, same content) is in the
copy too, right after the first (the earliest by Kafka timestamp): the tasks leave it out.

The records carried in from the hour before are merged in by the task
(`recon.decode.tasks.decode_tasks`).

Records of the copy an earlier hour already read (a re-delivery: same offset, same content)
are marked apart (the skip list: a few files of (topic, partition, offset, content hash));
every task reads that list and leaves them out, so an hour with re-delivered records reads its
copy the same way instead of shuffling the hour to the decoders a second time.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from recon.core.model import RAW_SCHEMA, RawRecord
from recon.decode.stream import RawRun, records_of, runs_of
from recon.faults import fail_once
from recon.layout import has_parquet

BAD_FILE = "_unreadable_in"
"""The copy's column naming the dump of an unreadable JSON line (null for a record)."""
CONTENT_HASH = "_content_hash"
"""The copy's hash of a record's key and value: with its offset, what makes it the same record."""
SKIPPED = "_skipped"
"""True in the skip list's rows an earlier hour read (null: other content at its offset, kept)."""
SkipList = dict[tuple[str, int], set[tuple[int, int]]]
"""Per (topic, partition), the (offset, content hash) of records not to decode."""
_BATCH_ROWS = 10_000
CARRY_COLUMNS = {  # carry folder column -> raw record column (`carried` is set by the reader)
    "topic": "topic",
    "partition": "partition",
    "offset": "offset",
    "raw_key": "key",
    "raw_value": "value",
    "raw_ts_ms": "ts_ms",
    "raw_headers": "headers",
    "skip": "skip",
}


def read_carried(carry_dir: str | None) -> dict[tuple[str, int], list[RawRecord]]:
    """The previous hour's carried records per (topic, partition), sorted by offset."""
    out: dict[tuple[str, int], list[RawRecord]] = {}
    if carry_dir is None or not has_parquet(Path(carry_dir)):
        return out
    table = pq.read_table(carry_dir, columns=list(CARRY_COLUMNS))
    table = table.rename_columns([CARRY_COLUMNS[c] for c in table.column_names])
    table = table.append_column("carried", pa.array([True] * table.num_rows, pa.bool_()))
    table = table.select([f.name for f in RAW_SCHEMA]).cast(RAW_SCHEMA)
    for batch in table.to_batches():
        for rec in records_of(batch):
            out.setdefault((rec.topic, rec.partition), []).append(rec)
    for recs in out.values():
        recs.sort(key=lambda r: r.offset)
    return out


def read_skip_list(skip_dir: str | None) -> SkipList:
    """The records an earlier hour read (`recon.decode.stage._drop_seen_records` wrote them)."""
    out: SkipList = {}
    if skip_dir is None or not has_parquet(Path(skip_dir)):
        return out
    cols = ["topic", "partition", "offset", CONTENT_HASH]
    table = pq.read_table(skip_dir, columns=cols, filters=[(SKIPPED, "=", True)])
    for t, p, o, h in zip(*table.to_pydict().values(), strict=True):
        out.setdefault((t, p), set()).add((o, h))
    return out


def kept_rows(
    batch: pa.RecordBatch,
    skip: SkipList,
    offsets: pa.Array,
    hashes_at: Callable[[list[int]], list[int]],
) -> pa.Array:
    """True for each row of `batch` not in `skip`: only rows at an offset in the list (`offsets`,
    every partition's) are looked at one by one, their content hashes by `hashes_at` (the
    rows' indexes)."""
    at = pc.indices_nonzero(pc.is_in(batch.column("offset"), value_set=offsets)).to_pylist()
    keep = [True] * batch.num_rows
    if at:
        cols = [batch.column(c).take(at).to_pylist() for c in ("topic", "partition", "offset")]
        for i, t, p, o, h in zip(at, *cols, hashes_at(at), strict=True):
            keep[i] = (o, h) not in skip.get((t, p), ())
    return pa.array(keep, pa.bool_())


_SAME_RECORD = ("topic", "partition", "offset", CONTENT_HASH)


def _neighbours(
    batch: pa.RecordBatch, before: pa.RecordBatch | None, names: tuple[str, ...]
) -> pa.Array:
    """True for each row of `batch` whose columns `names` equal the row's before it."""
    same = None
    for c in names:
        col = batch.column(c)
        head = before.column(c) if before is not None else pa.nulls(1, col.type)
        eq = pc.equal(col, pa.concat_arrays([head, col.slice(0, len(col) - 1)]))
        same = eq if same is None else pc.and_kleene(same, eq)
    return pc.fill_null(same, False)


def _later_copies(batch: pa.RecordBatch, before: pa.RecordBatch | None) -> pa.Array:
    """True for each row of `batch` that is a later copy of the row before it (the same
    topic, partition, offset and content hash; the copy is sorted so that a record's copies
    are neighbours, the earliest first); `before`: the row before the batch (None: none)."""
    return _neighbours(batch, before, _SAME_RECORD)


HASHES_SCHEMA = pa.schema(
    [("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
     (CONTENT_HASH, pa.int64())]
)  # fmt: skip
"""An hour's offsets and content hashes, for later hours' dedupe (`count_copy_files`)."""
HASHES_WRITE: dict[str, Any] = {
    "use_dictionary": ["topic", "partition"],
    "write_statistics": ["topic", "partition", "offset"],
}
"""A dictionary and statistics for the columns that repeat or are looked up, not the hashes."""
TMP_PREFIX = "_tmp-"
"""A file being written into an output folder (readers skip names starting with `_`)."""


def _count_batch(
    batch: pa.RecordBatch,
    before: pa.RecordBatch | None,
    value_bytes: str,
    found: dict[tuple[Any, ...], dict[str, Any]],
) -> None:
    """Add one batch of a copy file to `found`, its counts per (topic, partition, unreadable
    line or not); `before`: the row before the batch (None: none)."""
    counted = pa.table(
        {
            "topic": batch.column("topic"),
            "partition": batch.column("partition"),
            "bad": pc.is_valid(batch.column(BAD_FILE)),
            "offset": batch.column("offset"),
            "b": batch.column(value_bytes),
            "later": _later_copies(batch, before),
            "again": _neighbours(batch, before, _SAME_RECORD[:3]),
        }
    )
    sums = counted.group_by(["topic", "partition", "bad"], use_threads=False).aggregate(
        [([], "count_all"), ("later", "sum"), ("again", "sum"), ("b", "sum"),
         ("offset", "min"), ("offset", "max")]
    )  # fmt: skip
    for r in sums.to_pylist():
        got = found.setdefault(
            (r["topic"], r["partition"], r["bad"]),
            {"records": 0, "later": 0, "again": 0, "bytes": 0},
        )
        got["records"] += r["count_all"]
        got["later"] += r["later_sum"] or 0
        got["again"] += r["again_sum"] or 0
        got["bytes"] += r["b_sum"] or 0
        for agg, pick in (("min", min), ("max", max)):
            v, seen = r[f"offset_{agg}"], got.get(f"{agg}_offset")
            got[f"{agg}_offset"] = v if seen is None else pick(seen, v)


def count_copy_files(
    paths: Iterator[str], value_bytes: str, hashes_out: str
) -> Iterator[dict[str, Any]]:
    """Inside a task: the input counters of each copy file given, per (topic, partition):
    records, distinct records (less later copies), distinct offsets, value bytes (column
    `value_bytes`), lowest and highest offset; and a row of the unreadable lines it holds
    (`bad`: True). Read a batch at a time, from the columns they need: the copy is sorted,
    so a later copy of a record, and a repeated offset, are the row before's. The records'
    offsets and content hashes go to `hashes_out` as they are read, a file per copy file
    under its name (a retried task writes it again, whole: written aside, then renamed)."""
    cols = [*_SAME_RECORD, value_bytes, BAD_FILE]
    os.makedirs(hashes_out, exist_ok=True)
    for path in paths:
        found: dict[tuple[Any, ...], dict[str, Any]] = {}
        before = None
        name = os.path.basename(path)
        aside = os.path.join(hashes_out, f"{TMP_PREFIX}{uuid.uuid4().hex}-{name}")
        hashes = None
        for batch in pq.ParquetFile(path).iter_batches(_BATCH_ROWS, columns=cols):
            if not batch.num_rows:
                continue
            read = batch.filter(pc.is_null(batch.column(BAD_FILE))).select(HASHES_SCHEMA.names)
            if read.num_rows:
                hashes = hashes or pq.ParquetWriter(aside, HASHES_SCHEMA, **HASHES_WRITE)
                hashes.write_batch(read.cast(HASHES_SCHEMA))
            _count_batch(batch, before, value_bytes, found)
            before = batch.slice(batch.num_rows - 1)
        if hashes is not None:
            hashes.close()
            fail_once("decode:hashes-written-aside")  # retry tests: an attempt's file aside
            os.replace(aside, os.path.join(hashes_out, name))
        for (topic, part, bad), got in found.items():
            yield {
                "topic": topic, "partition": part, "bad": bad, "records": got["records"],
                "distinct": got["records"] - got["later"],
                "distinct_offsets": got["records"] - got["again"], "bytes": got["bytes"],
                "min_offset": got.get("min_offset"), "max_offset": got.get("max_offset"),
            }  # fmt: skip


def copy_records(path: str, skip: SkipList, runs: bool = False) -> Iterator[RawRecord | RawRun]:
    """A staging copy file's records, in its order, less unreadable lines, later copies of a
    record and those in `skip`; `runs`: a `RawRun` per partition of each batch where it can
    (`recon.decode.stream.runs_of`), for `recon.decode.stream.decode_raw`."""
    names = [f.name for f in RAW_SCHEMA]
    offsets = pa.array(sorted({o for s in skip.values() for o, _ in s}), pa.int64())
    cols = [*names, BAD_FILE, CONTENT_HASH]
    before = None
    for batch in pq.ParquetFile(path).iter_batches(_BATCH_ROWS, columns=cols):
        if not batch.num_rows:
            continue
        # not an unreadable line, nor a later copy of a record
        later = _later_copies(batch, before)
        before = batch.slice(batch.num_rows - 1)
        keep = pc.and_(pc.is_null(batch.column(BAD_FILE)), pc.invert(later))
        if skip:

            def hashes_at(at: list[int], batch: pa.RecordBatch = batch) -> list[int]:
                return batch.column(CONTENT_HASH).take(at).to_pylist()

            keep = pc.and_(keep, kept_rows(batch, skip, offsets, hashes_at))
        # most batches keep every row: filtering copied each of their values
        records = batch if keep.false_count == 0 and keep.null_count == 0 else batch.filter(keep)
        raw = pa.RecordBatch.from_arrays(records.columns[: len(names)], schema=RAW_SCHEMA)
        yield from runs_of(raw) if runs else records_of(raw)
