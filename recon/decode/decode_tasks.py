"""Inside a decode task: its input read, decoded in offset order, and written.

A task's input is a list of items, each one of: a file of the hour's staging copy
(`recon.decode.copy_input`), a partition's records in the dumps read in place
(`recon.decode.dump_input`), or None, the partitions that have only records carried in from
the hour before. The records carried in are few: every task reads them, and feeds those of its
partitions in offset order (`recon.decode.stream.with_carried`).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

from recon.core.model import RawRecord
from recon.decode.base import DecodeContext
from recon.decode.copy_input import copy_records, read_carried, read_skip_list
from recon.decode.dump_input import DumpSlice, dump_records
from recon.decode.stream import decode_raw, with_carried
from recon.decode.task_files import write_task_files

TaskInput = str | DumpSlice | None
"""A copy file, a partition in the dumps, or None (the partitions with only carried records)."""


def decode_task_inputs(
    items: Iterator[TaskInput],
    fmt: str,
    ctx: DecodeContext,
    carry_dir: str | None,
    carried_only: list[tuple[str, int]],
    staging: str,
    skip_dir: str | None = None,
) -> Iterator[tuple[int, str, str]]:
    """Decode each input given (None: the partitions that only have carried records,
    `carried_only`), less the records in `skip_dir` (`read_skip_list`), write the output
    (`write_task_files`), and yield its file rows (task, kind, path)."""
    carried = read_carried(carry_dir)
    skip = read_skip_list(skip_dir)
    streams: list[Iterator[RawRecord]] = []
    for item in items:
        if item is None:
            streams.append(chain.from_iterable(carried.get(k, []) for k in sorted(carried_only)))
            continue
        own = copy_records(item, skip) if isinstance(item, str) else dump_records(item, skip)
        # no merge layer on every record when nothing was carried in (most hours)
        streams.append(with_carried(own, carried) if carried else own)
    batches = decode_raw(chain.from_iterable(streams), fmt, ctx, shapes=True)
    for rows in write_task_files(batches, staging):
        yield from zip(*(c.to_pylist() for c in rows.columns), strict=True)
