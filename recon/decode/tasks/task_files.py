"""The decode tasks write their output themselves, and the driver commits one attempt per task.

A decode task's Python worker turns each Kafka partition's records into output batches
(`recon.decode.stream`). Handing them back to Spark to write cost more JVM time than the decoding
itself: every batch crossed to the JVM, was converted row by row (the row images are maps) and
written again as Parquet (measured on 2 cores, a 100k-message DataWorks hour: 2.85 CPU-seconds of
JVM per task beside 0.9 s of decoding). Here the worker writes the batches with Arrow's Parquet
writer, one file per row kind, into a folder of its own attempt, and returns one row per file.

Beside its files, a task writes a summary of what they hold (`recon.decode.summary.TaskSummary`:
the decoder's counters, the events per table, op and shape, the quarantine's reasons), so the
driver adds those up instead of reading the output back with Spark; the counters and shapes
are in the summary only.

Spark's rule for output holds: only a task attempt that succeeded counts. The driver collects
the rows of the successful attempts (one per task) and moves their files into place
(`<staging>/kind=<kind>/part-<task>.parquet`, the layout Spark's `partitionBy("kind")` wrote);
files of failed or duplicate attempts stay in `_tasks` and are deleted with it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import TaskContext

from recon.core.model import OUTPUT_SCHEMA
from recon.decode.premerge.prefold import Prefold
from recon.decode.premerge.value_classes import ValueClasses
from recon.decode.summary import TaskSummary
from recon.faults import fail_once

TASKS = "_tasks"  # under the staging folder; Spark's readers skip names starting with `_`
SUMMARY = "summary"
"""The kind of a task's summary file (JSON: `TaskSummary.rows`)."""
FILE_ROWS_DDL = "task int, kind string, path string"
_FILE_ROWS = pa.schema(
    [
        pa.field("task", pa.int32()),
        pa.field("kind", pa.string()),
        pa.field("path", pa.string()),
    ]
)
_FILE_SCHEMA = OUTPUT_SCHEMA.remove(OUTPUT_SCHEMA.get_field_index("kind"))  # kind: the folder


def write_task_files(batches: Iterable[pa.RecordBatch], staging: str) -> Iterator[pa.RecordBatch]:
    """Inside a decode task: write `batches` (of `OUTPUT_SCHEMA`) to this attempt's folder, a
    Parquet file per row kind, then yield one row per file (`FILE_ROWS_DDL`)."""
    tc = TaskContext.get()
    task, attempt = (tc.partitionId(), tc.taskAttemptId()) if tc else (0, 0)
    folder = Path(staging) / TASKS / f"{task:05d}-{attempt}"  # the attempt's id is unique
    files: dict[str, GroupedParquet] = {}
    summary = TaskSummary()
    prefold = Prefold()
    values = ValueClasses()
    try:
        for batch in batches:
            kinds = batch.column(0)
            present = pc.unique(kinds).to_pylist()
            for kind in present:
                part = batch if len(present) == 1 else batch.filter(pc.equal(kinds, kind))
                if summary.add(kind, part):
                    continue
                if kind not in files:
                    path = folder / f"kind={kind}" / "part.parquet"
                    files[kind] = GroupedParquet(path, _FILE_SCHEMA, _WRITER)
                written = pa.RecordBatch.from_arrays(part.columns[1:], schema=_FILE_SCHEMA)
                files[kind].add(written)
                if kind == "event":
                    prefold.add(written)
                    values.add(written)
    finally:
        for f in files.values():
            f.close()
    paths = {k: str(f.path) for k, f in files.items()}
    summary.add_value_classes(values.counts)
    if "event" in files:
        _write_winners(prefold, files["event"].path, folder, paths, summary)
    rows = summary.rows()
    if rows:
        paths[SUMMARY] = str(folder / f"kind={SUMMARY}" / "part.json")
        Path(paths[SUMMARY]).parent.mkdir(parents=True, exist_ok=True)
        Path(paths[SUMMARY]).write_text(json.dumps(rows))
    fail_once("decode:task-files-written")  # retry tests: an attempt whose files are written
    if paths:
        kinds = sorted(paths)
        yield pa.RecordBatch.from_pydict(
            {"task": [task] * len(kinds), "kind": kinds, "path": [paths[k] for k in kinds]},
            schema=_FILE_ROWS,
        )


WINNER = "winner"
"""The kind of a task's events less those it superseded (`recon.decode.premerge.prefold`)."""


def _write_winners(
    prefold: Prefold, events: Path, folder: Path, paths: dict[str, str], summary: TaskSummary
) -> None:
    """The task's winners file, when enough of its events were superseded to be worth it
    (`Superseded.worth_writing`), and the superseded events counted in its summary."""
    sup = prefold.finish()
    if sup is None or not sup.worth_writing():
        return
    out = folder / f"kind={WINNER}" / "part.parquet"
    sup.write_winners(events, out, **_WRITER)
    paths[WINNER] = str(out)
    summary.add_superseded(sup.counts)


DICTIONARY_COLUMNS = (
    "db", "tbl", "op", "pk.list.element", "before.key_value.key", "after.key_value.key",
    "types.key_value.key", "types.key_value.value", "defaults.key_value.key", "topic",
    "binlog_file", "reason", "raw_headers.list.element.key", "stat",
)  # fmt: skip
"""The output's columns (Parquet paths) whose values repeat: names, ops, types, reasons. The
others hold a value per row (images' values, order keys, raw bytes): a dictionary of them was
built and thrown away."""
STATISTICS_COLUMNS = (
    "partition", "offset", "binlog_pos", "event_index", "event_time_ms", "raw_ts_ms", "skip", "n",
)  # fmt: skip
"""The output's columns with min/max statistics: numbers. Those of the text and bytes (each
value compared) cost a third of writing a Debezium hour's events, and no reader filters on
them. Without both: a 250k-message task's events written in 0.33 s against 0.48 s."""
_WRITER = {
    "use_dictionary": list(DICTIONARY_COLUMNS),
    "write_statistics": list(STATISTICS_COLUMNS),
}
ROW_GROUP_BYTES = 64 * 1024 * 1024
"""Arrow bytes of a kind's batches written as one Parquet row group: a row group per decoder
batch (20k rows) made files that Spark read more slowly; this bounds what a task holds."""


class GroupedParquet:
    """A Parquet file written a row group of batches at a time: the batches held until they
    make `group_bytes` of Arrow data (a task's output kinds, its partitions' offsets and
    hashes: a row group per batch costs its writer and its readers)."""

    def __init__(
        self,
        path: Path | str,
        schema: pa.Schema,
        options: dict[str, Any],
        group_bytes: int = ROW_GROUP_BYTES,
    ) -> None:
        self.path = Path(path)
        self.schema, self.group_bytes = schema, group_bytes
        self.held: list[pa.RecordBatch] = []
        self.held_bytes = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = pq.ParquetWriter(self.path, schema, **options)

    def add(self, batch: pa.RecordBatch) -> None:
        self.held.append(batch)
        self.held_bytes += batch.nbytes
        if self.held_bytes >= self.group_bytes:
            self.flush()

    def flush(self) -> None:
        if self.held:
            table = pa.Table.from_batches(self.held, schema=self.schema)
            self.writer.write_table(table, row_group_size=table.num_rows)
        self.held, self.held_bytes = [], 0

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.writer.close()

    def __enter__(self) -> GroupedParquet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def commit_task_files(files: Iterable[tuple[int, str, str]], staging: Path) -> None:
    """On the driver, after the job: move the successful attempts' files (task, kind, path)
    into `<staging>/kind=<kind>/part-<task>.parquet` (a summary: `.json`), then drop every
    attempt's folder."""
    for task, kind, path in files:
        dest = staging / f"kind={kind}" / f"part-{task:05d}{Path(path).suffix}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, dest)
    shutil.rmtree(staging / TASKS, ignore_errors=True)
