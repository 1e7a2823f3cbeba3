"""How big is a run? Decided before Spark starts, from the dumps and the manifest (no Spark: the
DAGs call it when a stage's spark-submit command is rendered).

A small run (a quiet hour, the demo) spends most of its time compiling, not computing: Java's
optimising JIT compiler (C2) and Spark's per-query code generation burn CPU on code that runs
over a few thousand rows. Measured on 2 cores, a 2k-message DataWorks hour in one `recon run`
(interleaved runs): 25.3 s and 44.5 CPU-seconds as before; 19.7 s and 25.5 CPU-seconds without
whole-stage code generation (`recon.spark.session.sized_for`, decided per stage) and with the
JVM's quick compiler only (`SMALL_RUN_JVM_OPTIONS`, decided per JVM, here; with the serial
garbage collector too since session 16).

Where the quick compiler stops paying follows the hour's records, not its bytes (session 18,
`recon run` of one generated hour, two interleaved runs each, seconds, default -> quick):

| hour | dump MB | default | quick only |
|---|---:|---:|---:|
| DataWorks 100k messages | 9 | 23.2, 22.4 | 19.8, 21.1 |
| Debezium 100k | 21 | 27.2, 27.9 | 23.4, 23.2 |
| Tencent protobuf 100k | 12 | 27.9, 28.4 | 22.0, 25.6 |
| DataWorks 250k | 22 | 31.9, 29.4 | 31.7, 31.0 |
| Debezium 250k | 55 | 37.8, 39.1 | 38.7, 38.5 |
| DataWorks 500k | 44 | 41.8, 41.3 | 47.4, 45.7 |

So a run is small below `SMALL_RUN_RECORDS` records (well under the ~250k where the two meet),
and below `SMALL_RUN_BYTES` of dumps (an hour of few huge messages is JVM work all the same).

A run that is not small but under 2.5M records (`QUICK_JIT_RECORDS`) still gets the quick
compiler, without the small run's serial collector and raised compile thresholds
(`QUICK_JIT_JVM_OPTIONS`). Session 31 found the optimising compiler (C2) spending 31-44 s of
compile time on every 500k-message hour, most of a core for most of the run, and the quick
compiler alone 15-20% faster there (fresh `recon run`s, alternating; the numbers are in
`recon.sparkconf`), but 15% slower on a 2M-message hour, where C2's code paid back; the limit
was then 1M records. Since session 60 the JVM's work follows the hour's keys more than its
messages (the decode tasks pre-fold each key's changes and write the events themselves), and
session 61 measured (fresh `recon run`s of generated DataWorks hours, alternating, quick ->
optimising): 2M messages of 100k keys 18.7 / 18.6 s against 23.7 / 24.1 s (Debezium: 27.5
against 33.5 s); 2M of 2M keys, the JVM's most, 50.0 / 46.1 against 49.4 / 45.5 s; 5M of 5M
keys 111.6 against 91.3 s, where C2 pays back again.
"""

from __future__ import annotations

import gzip
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import pyarrow.parquet as pq

from recon.config import PipelineConfig
from recon.decode.input.connect_input import avro_records
from recon.layout import dump_bytes
from recon.merge.manifest import load_manifest, state_rows, unloaded_snapshot_bytes
from recon.objstore import local_copies
from recon.rawdumps import JSONL_DUMPS, PARQUET_DUMP, dump_files
from recon.sparkconf import QUICK_JIT_JVM_OPTIONS, SMALL_RUN_JVM_OPTIONS

SMALL_RUN_RECORDS = 150_000
"""Dump records (Kafka messages) of all the run's hours."""
SMALL_RUN_BYTES = 48 * 1024 * 1024
"""Dump bytes of all the run's hours (a 100k-message DataWorks hour is ~9 MB of Parquet, a
Debezium one with its schemas ~21 MB)."""
SMALL_RUN_STATE_ROWS = 100_000
"""State rows a merge may rewrite."""

QUICK_JIT_RECORDS = 2_500_000
"""Below this many dump records (and `QUICK_JIT_BYTES`, `QUICK_JIT_STATE_ROWS`) a run that is
not small still compiles with the quick JIT compiler only (`QUICK_JIT_JVM_OPTIONS`: 20% faster
on a 2M-message hour of 100k keys, the same on one of 2M keys, 20% slower on 5M of 5M keys:
the module's doc)."""
QUICK_JIT_BYTES = 512 * 1024 * 1024
"""Dump bytes (a 2M-message DataWorks hour is ~170 MB of Parquet, a 500k Debezium one ~110 MB)."""
QUICK_JIT_STATE_ROWS = 1_000_000
"""State rows a merge may rewrite (a big state's fold and write are JVM work, as a big hour's)."""


class _RunSize(NamedTuple):
    """What a run's size is judged by, measured once (the DAGs measure at every stage's start)."""

    dump_bytes: int
    records: int
    """Counted until the largest limit it is compared with (`_run_size`)."""
    state_rows: int
    snapshot_bytes: int

    def within(self, records: int, size: int, state: int) -> bool:
        """Dumps under `records` and `size` bytes, the state the run merges into under `state`
        rows, the snapshot it still loads under `size` bytes."""
        return (
            self.dump_bytes < size
            and self.records < records
            and self.state_rows < state
            and self.snapshot_bytes < size
        )


def _run_size(cfg: PipelineConfig, hours: list[datetime], records: int, size: int) -> _RunSize:
    """Dump records are counted until `records`, and not at all from `size` dump bytes up (the
    largest limits compared with: JSON Lines are counted by reading them)."""
    nbytes = dump_bytes(cfg.raw_root, cfg.topics, hours, cfg.dump)
    # an unreadable manifest counts as empty here: the merge refuses it with the fix
    man = load_manifest(cfg, allow_missing=True)
    return _RunSize(
        nbytes,
        dump_records(cfg, hours, records) if nbytes < size else records,
        state_rows(man),
        unloaded_snapshot_bytes(cfg, man),
    )


_SMALL = (SMALL_RUN_RECORDS, SMALL_RUN_BYTES, SMALL_RUN_STATE_ROWS)


def small_run(cfg: PipelineConfig, hours: list[datetime]) -> bool:
    """The run's dumps and the state it merges into are small (see the module's doc)."""
    return _run_size(cfg, hours, SMALL_RUN_RECORDS, SMALL_RUN_BYTES).within(*_SMALL)


def run_jvm_options(cfg: PipelineConfig, hours: list[datetime]) -> str:
    """The driver JVM options for a run of `hours` (of a local session, or appended to our
    spark-submit's): the small-run options, the quick compiler's up to about a million
    records, else none (the JVM's default, tiered compilation)."""
    size = _run_size(cfg, hours, QUICK_JIT_RECORDS, QUICK_JIT_BYTES)
    if size.within(*_SMALL):
        return SMALL_RUN_JVM_OPTIONS
    if size.within(QUICK_JIT_RECORDS, QUICK_JIT_BYTES, QUICK_JIT_STATE_ROWS):
        return QUICK_JIT_JVM_OPTIONS
    return ""


def dump_records(cfg: PipelineConfig, hours: list[datetime], limit: int) -> int:
    """The records of the hours' dumps, counted until `limit` (a big hour is not read to its
    end): a Parquet file's footer, a JSON Lines file's lines. A file that cannot be read counts
    as `limit` (not small: the decode quarantines it, the default compiler decodes the rest)."""
    total = 0
    listed = dump_files(cfg.raw_root, cfg.topics, hours, cfg.dump)
    # a bucket's dumps are copied into the warehouse here: the decode reads those copies
    paths = local_copies([f for f, _ in listed], cfg.layout.object_mirror, dict(listed))
    for path in paths:
        total += _records(path, limit - total)
        if total >= limit:
            return limit
    return total


_LINE_FILES = (".bin", ".bin.gz", ".json", ".json.gz")
"""Kafka Connect's line-separated files (counted by lines, as JSON Lines)."""


def _records(path: Path, limit: int) -> int:
    if path.name.endswith(PARQUET_DUMP):
        try:
            return int(pq.read_metadata(path).num_rows)
        except (OSError, ValueError):  # pyarrow's ArrowInvalid is a ValueError
            return limit
    if path.name.endswith(".avro"):
        return avro_records(path, limit)
    if not path.name.endswith((*JSONL_DUMPS, *_LINE_FILES)):
        return 0  # not a dump the decode reads
    opener = gzip.open if path.name.endswith(".gz") else open
    lines, last = 0, b"\n"
    try:
        with opener(path, "rb") as f:
            while lines < limit and (chunk := f.read(1 << 20)):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except (OSError, EOFError):  # gzip.BadGzipFile is an OSError
        return limit
    return lines + (last != b"\n")
