"""Is a run small? Decided before Spark starts, from the dumps and the manifest (no Spark: the
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
"""

from __future__ import annotations

import gzip
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq

from recon.config import PipelineConfig
from recon.layout import JSONL_DUMPS, PARQUET_DUMP, dump_bytes, dump_files
from recon.merge.manifest import load_manifest, state_rows, unloaded_snapshot_bytes

SMALL_RUN_RECORDS = 150_000
"""Dump records (Kafka messages) of all the run's hours."""
SMALL_RUN_BYTES = 48 * 1024 * 1024
"""Dump bytes of all the run's hours (a 100k-message DataWorks hour is ~9 MB of Parquet, a
Debezium one with its schemas ~21 MB)."""
SMALL_RUN_STATE_ROWS = 100_000
"""State rows a merge may rewrite."""


def small_run(cfg: PipelineConfig, hours: list[datetime]) -> bool:
    """The run's dumps and the state it merges into are small (see the module's doc)."""
    if dump_bytes(cfg.raw_path, cfg.topics, hours) >= SMALL_RUN_BYTES:
        return False
    if dump_records(cfg, hours, SMALL_RUN_RECORDS) >= SMALL_RUN_RECORDS:
        return False
    # an unreadable manifest counts as empty here: the merge refuses it with the fix
    man = load_manifest(cfg, allow_missing=True)
    if state_rows(man) >= SMALL_RUN_STATE_ROWS:
        return False
    return unloaded_snapshot_bytes(cfg, man) < SMALL_RUN_BYTES


def dump_records(cfg: PipelineConfig, hours: list[datetime], limit: int) -> int:
    """The records of the hours' dumps, counted until `limit` (a big hour is not read to its
    end): a Parquet file's footer, a JSON Lines file's lines. A file that cannot be read counts
    as `limit` (not small: the decode quarantines it, the default compiler decodes the rest)."""
    total = 0
    for path in dump_files(cfg.raw_path, cfg.topics, hours):
        total += _records(path, limit - total)
        if total >= limit:
            return limit
    return total


def _records(path: Path, limit: int) -> int:
    if path.name.endswith(PARQUET_DUMP):
        try:
            return int(pq.read_metadata(path).num_rows)
        except (OSError, ValueError):  # pyarrow's ArrowInvalid is a ValueError
            return limit
    if not path.name.endswith(JSONL_DUMPS):
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
