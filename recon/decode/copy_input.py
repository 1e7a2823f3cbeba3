"""The decode tasks read their input themselves, from the hour's staging copy.

The staging copy (`recon.decode.stage._read_input`) is written partitioned by Kafka partition
(topic, partition) and sorted by offset within it: a partition's records are in one file, in the
order its decoder needs (a file may hold several partitions, one after the other: adaptive
execution packs small ones into one task). So a decode task can take a file, read it with Arrow
a row group at a time, and decode it, instead of Spark reading the copy, shuffling it a second
time by partition, sorting it, and handing it to Python (measured on 2 cores, a 500k-message
DataWorks hour: that shuffle and hand-over cost ~4.5 of the decoders' ~10 s job).

The records carried in from the hour before are few: every task reads them, and feeds those of
its partitions in offset order (`recon.decode.stream.with_carried`). Partitions with carried
records and none in the hour get a task of their own (its file is None).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from recon.core.model import RAW_SCHEMA, RawRecord
from recon.decode.base import DecodeContext
from recon.decode.stream import decode_raw, records_of, with_carried
from recon.decode.task_files import write_task_files
from recon.layout import has_parquet

BAD_FILE = "_unreadable_in"
"""The copy's column naming the dump of an unreadable JSON line (null for a record)."""
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


def _copy_records(path: str) -> Iterator[RawRecord]:
    names = [f.name for f in RAW_SCHEMA]
    for batch in pq.ParquetFile(path).iter_batches(_BATCH_ROWS, columns=[*names, BAD_FILE]):
        records = batch.filter(pc.is_null(batch.column(BAD_FILE)))  # not an unreadable line
        yield from records_of(pa.RecordBatch.from_arrays(records.columns[:-1], schema=RAW_SCHEMA))


def decode_copy_files(
    files: Iterator[str | None],
    fmt: str,
    ctx: DecodeContext,
    carry_dir: str | None,
    carried_only: list[tuple[str, int]],
    staging: str,
) -> Iterator[tuple[int, str, str]]:
    """Inside a decode task: decode each copy file given (None: the partitions that only have
    carried records, `carried_only`), write the output (`write_task_files`), and yield its
    file rows (task, kind, path)."""
    carried = read_carried(carry_dir)
    streams: list[Iterator[RawRecord]] = []
    for f in files:
        if f is None:
            streams.append(chain.from_iterable(carried.get(k, []) for k in sorted(carried_only)))
        else:  # no merge layer on every record when nothing was carried in (most hours)
            streams.append(with_carried(_copy_records(f), carried) if carried else _copy_records(f))
    for rows in write_task_files(decode_raw(chain.from_iterable(streams), fmt, ctx), staging):
        yield from zip(*(c.to_pylist() for c in rows.columns), strict=True)
