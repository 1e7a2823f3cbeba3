"""The `decode` stage of one pipeline-hour: raw dumps -> canonical events, quarantine, carry.

Writes (paths from `recon.layout`; contract 4): the hour's events, the raw records carried to the
next hour (open segments, transactions, unpaired update halves), the offset intervals seen (for
later hours' dedupe), the table definitions after the hour, the quarantine (bytes + reason) and,
last, the counters (`DecodeCounters`): their presence means the hour is decoded.

Every output of an hour is replaced as a whole, so re-running an hour converges. Only
aggregates reach the driver, never records.
"""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import chain
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from recon.config import PipelineConfig
from recon.core.ddl import apply_ddl
from recon.core.model import OUTPUT_SCHEMA
from recon.core.sqlddl import TableDef
from recon.decode.base import DecodeContext
from recon.decode.input.connect_input import normalize
from recon.decode.input.copy_input import (
    BAD_FILE,
    CONTENT_HASH,
    SKIPPED,
    TMP_PREFIX,
    count_copy_files,
)
from recon.decode.input.dump_input import VALUE_BYTES_STAT, count_dump_files, dumps_in_place
from recon.decode.input.dumps import check_complete, read_hour
from recon.decode.input.offset_index import INTERVALS, earlier_intervals
from recon.decode.input.raw_records import carried_records, hour_files
from recon.decode.stats import DecodeCounters, PartitionCounters, Stat, is_detail
from recon.decode.stream import decode_stream
from recon.decode.summary import (
    SHAPE_FIELDS,
    SUPERSEDED,
    VALUES,
    DecodedShapes,
    EventShape,
    SupersededCount,
    ValueClassCount,
    shape_keys,
    summary_rows,
    with_shape_texts,
)
from recon.decode.tasks.decode_tasks import TaskInput, decode_task_inputs, packed
from recon.decode.tasks.task_files import (
    FILE_ROWS_DDL,
    SUMMARY,
    WINNER,
    commit_task_files,
    write_task_files,
)
from recon.faults import checkpoint
from recon.layout import (
    Layout,
    dump_bytes,
    folder_files,
    has_parquet,
    hour_text,
    read_json,
    replace_dir,
    write_json_atomic,
)
from recon.spark.session import SMALL_HOUR_BYTES, job_named, sized_for

PartitionKey = tuple[str, int]
HASH = CONTENT_HASH
VALUE_BYTES = "_value_bytes"
_COPY_WRITE = {
    "maxRecordsPerFile": "0",
    "parquet.enable.dictionary#value": "false",
    "parquet.column.statistics.enabled#value": "false",
    "parquet.size.statistics.enabled#value": "false",
}
"""The staging copy's Parquet options (`_read_input`)."""
COPY_INPUT = True
"""Decoders read the staging copy themselves, leaving out the records an earlier hour read (the
tests turn it off to compare with the shuffled input every hour used before)."""

log = logging.getLogger(__name__)


def table_defs_before(cfg: PipelineConfig, hour: datetime) -> dict[str, TableDef]:
    """Table definitions in force at the start of `hour`: config, then the previous hour's state."""
    defs: dict[str, TableDef] = {}
    for name, t in cfg.tables.items():
        tdef = t.table_def()
        if tdef is not None:
            defs[name] = tdef
    prev = cfg.layout.schema(hour - timedelta(hours=1))
    if prev.is_file():
        for name, d in read_json(prev)["tables"].items():
            tdef = TableDef.from_json(d)
            if not (tdef.unreadable and name in defs):  # the config's definition arrived
                defs[name] = tdef
    return defs


def fold_ddl(defs: dict[str, TableDef], ddls: list[tuple[str, str, str]]) -> dict[str, TableDef]:
    """Apply the hour's DDL (db, table, sql), in source order, to the table definitions (the
    rule the decoders apply as they go: `recon.core.ddl.apply_ddl`)."""
    out = dict(defs)
    for db, _tbl, sql in ddls:
        apply_ddl(out, db, sql)  # an unreadable one marks its table (already quarantined)
    return out


@dataclass
class _Input:
    """The hour's raw records, what was counted about them, and what goes into the decoders."""

    unreadable: DataFrame | None
    """JSON lines of the dumps that could not be read (topic, file, line bytes); None: none."""
    stats: dict[PartitionKey, dict[str, Any]]
    cross_dups: dict[PartitionKey, int]
    resets: dict[PartitionKey, int]
    """Records at an offset an earlier hour (or this one) read with other content."""
    to_decode: Callable[[], DataFrame]
    """The records for the decoders Spark shuffles to (the tests' other way), built on call."""
    tasks: list[TaskInput]
    """What the decoders read themselves, with the carried-in records: the hour's staging
    copy's files (partitioned by (topic, partition), sorted by offset:
    `recon.decode.input.copy_input`), or its partitions in the dumps read in place
    (`recon.decode.input.dump_input`)."""
    skip: Path | None
    """The copy's records at offsets an earlier hour read, those it read (same content) marked
    `SKIPPED`, which the decoders leave out; None: none."""
    carry_in: Path | None
    """The previous hour's carry folder, when it holds records."""

    @property
    def carried_in_available(self) -> bool:
        return self.carry_in is not None


@dataclass
class _Decoded:
    """What the decoders produced, as aggregates read back from the staged output."""

    stats: dict[PartitionKey, dict[str, int]]
    events_by_op: dict[str, int]
    ddls: list[tuple[str, str, str]]
    quarantine_reasons: dict[str, int]
    unreadable_lines: int
    shapes: list[EventShape]
    newest: dict[str, int]
    """Newest source time (epoch ms) of the events per table, "db.table" (`newest_event_ms`)."""
    superseded: list[SupersededCount]
    """The events the decode tasks' pre-folds superseded (`recon.decode.premerge.prefold`)."""
    value_classes: list[ValueClassCount]
    """The decode tasks' events' checked values per class (`recon.decode.premerge.value_classes`)."""


def decode_hour(
    spark: SparkSession,
    cfg: PipelineConfig,
    hour: datetime,
    run_id: str | None = None,
    allow_incomplete: bool = False,
) -> DecodeCounters:
    """Run the decode stage for one hour; returns the counters it also writes."""
    run_id = run_id or uuid.uuid4().hex[:12]
    layout = cfg.layout
    files = hour_files(cfg, hour)
    check_complete(files, hour, allow_incomplete)
    files = normalize(spark, layout, cfg.format, cfg.dump, hour, files)
    staging, copy = layout.staging(run_id), layout.staging(f"{run_id}-input")
    skip = layout.staging(f"{run_id}-skip")
    for d in (staging, copy, skip):
        shutil.rmtree(d, ignore_errors=True)
    small = dump_bytes(cfg.raw_root, cfg.topics, [hour], cfg.dump) < SMALL_HOUR_BYTES
    with sized_for(spark, small):
        inp = _read_input(spark, cfg, hour, files, copy, skip, staging / "offset_hashes")
        unreadable = _decode_to_staging(spark, cfg, hour, inp, staging)
        paired, paired_events = _pair_across_partitions(spark, staging)
        decoded = _read_staged(spark, staging, unreadable + paired_events)
        _move_value_bytes(decoded, inp.stats)
        _count_paired(decoded, paired)
        _write_offset_intervals(spark, inp.stats, staging / "offsets", staging / "offset_hashes")
    checkpoint("decode:staged")
    _publish_outputs(layout, hour, staging)
    checkpoint("decode:outputs-replaced")
    defs = fold_ddl(table_defs_before(cfg, hour), decoded.ddls)
    write_json_atomic(
        layout.schema(hour), {"tables": {k: v.to_json() for k, v in sorted(defs.items())}}
    )
    counters = _counters(cfg, hour, run_id, inp, decoded)
    unread = sorted(f for hf in files for f in hf.unread)
    if unread:
        counters["unread_files"] = unread
    shapes: DecodedShapes = {
        "events_files": folder_files(layout.events(hour)),
        "shapes": decoded.shapes,
        "winners_files": folder_files(layout.winners(hour)),
        "superseded": decoded.superseded,
    }
    if not paired_events:  # the events paired across partitions (by Spark) are not counted
        shapes["value_classes"] = decoded.value_classes
    counters["event_shapes"] = shapes
    write_json_atomic(layout.decode_counters(hour), counters)
    for d in (staging, copy, skip):
        shutil.rmtree(d, ignore_errors=True)
    log.info(
        "%s %s: decoded %s records into %s events %s",
        cfg.name, counters["hour"], counters["totals"].get("records", 0),
        sum(counters["events_by_op"].values()), counters["events_by_op"],
    )  # fmt: skip
    return counters


def _read_input(
    spark: SparkSession,
    cfg: PipelineConfig,
    hour: datetime,
    files: list[Any],
    copy: Path,
    skip: Path,
    hashes_out: Path,
) -> _Input:
    """The hour's records, counted, their offsets and content hashes written to `hashes_out`
    for later hours, and what the decoders read: the Parquet dumps in place when each
    partition's records are in offset order in them already (`_dumps_in_place`), or else a
    copy sorted so, written to `copy` in one pass over the dumps (`_staging_copy`)."""
    jsonl = any(hf.jsonl for hf in files)  # their unreadable lines ride in the copy
    # (the tests' shuffled decoders read no dumps: they take the copy, which counts it all)
    in_place = None if jsonl or not COPY_INPUT else _dumps_in_place(spark, files)
    if in_place is not None:
        stats, tasks = in_place
        bad = None

        def readable() -> DataFrame:  # read by Spark only where an earlier hour read offsets
            return read_hour(spark, files)[0].withColumn(HASH, F.xxhash64("key", "value"))

    else:
        records, unreadable = read_hour(spark, files)
        copied, bad, stats, tasks = _staging_copy(spark, records, unreadable, copy, hashes_out)

        def readable() -> DataFrame:
            return copied

    log.info(
        "%s %s: the decoders read %s", cfg.name, hour_text(hour),
        "the dumps in place (each partition in offset order in them)" if in_place is not None
        else "a staging copy of the hour sorted by partition and offset",
    )  # fmt: skip
    fresh, cross_dups, resets, seen = _drop_seen_records(
        spark, cfg.layout, hour, readable, stats, skip
    )
    if any(st["distinct"] > st["distinct_offsets"] for st in stats.values()):
        _count_resets_in_hour(fresh(), seen, resets)
    carry_dir = cfg.layout.carry(hour - timedelta(hours=1))
    carried_in = has_parquet(carry_dir)

    def to_decode() -> DataFrame:
        # for the decoders Spark shuffles to (the copy's readers find them in order): a
        # record's later copies left out, the earliest by Kafka timestamp decoded
        first = Window.partitionBy("topic", "partition", "offset", HASH).orderBy("ts_ms")
        one = fresh().withColumn("_n", F.row_number().over(first)).where(F.col("_n") == 1)
        one = one.drop("_n", HASH)
        return one.unionByName(carried_records(spark, carry_dir)) if carried_in else one

    return _Input(
        bad, stats, cross_dups, resets, to_decode,
        tasks=tasks, skip=skip if has_parquet(skip) else None,
        carry_in=carry_dir if carried_in else None,
    )  # fmt: skip


def _dumps_in_place(
    spark: SparkSession, files: list[Any]
) -> tuple[dict[PartitionKey, dict[str, Any]], list[TaskInput]] | None:
    """The input counters and the decoders' partitions of an hour whose Parquet dumps can be
    read in place (`recon.decode.input.dump_input`): a task per dump file counts its records from
    its small columns (the decoders count the value bytes, and write the offsets and content
    hashes, as they read the values); None when they cannot."""
    items = [(path, hf.topic) for hf in files for path in hf.parquet]
    if not items:
        return None
    with job_named(spark, "decode: the dumps' input counters, if they are in offset order"):
        # a task per file, up to a few per core (an hour of many small files)
        n = min(len(items), 4 * spark.sparkContext.defaultParallelism)
        rows = spark.sparkContext.parallelize(items, n).mapPartitions(count_dump_files).collect()
    found = dumps_in_place(rows)
    return None if found is None else (dict(found[0]), list(found[1]))


def _staging_copy(
    spark: SparkSession,
    records: DataFrame,
    unreadable: DataFrame | None,
    copy: Path,
    hashes_out: Path,
) -> tuple[DataFrame, DataFrame | None, dict[PartitionKey, dict[str, Any]], list[TaskInput]]:
    """The hour's records, each partition's sorted by offset and content, written to `copy` in
    one pass over the dumps: the counters, the offsets kept for later hours and the decode
    read that copy, not the dumps again (it was three passes and three shuffles of them).
    Returns (the copy's readable records, the unreadable lines or None, the input counters,
    the copy's files)."""
    copied = _every_record_sorted(records, unreadable)
    with job_named(spark, "decode: the hour's records, sorted, to a staging copy"):
        # a file per task, never split: a partition's records stay in one file; the values
        # without a dictionary (each is its own: building one and throwing it away cost
        # ~0.5 s of a 500k-message Debezium hour) and without statistics (no reader filters
        # on them, and the minimum and maximum compare values that share a long prefix:
        # writing a 500k-message Debezium copy took ~3.9 s with them, ~2.9 s without)
        copied.write.options(**_COPY_WRITE).parquet(str(copy))
    # no cache: each pass re-reads the copy in bounded splits, so a task holds a slice of the
    # hour, never the hour (a cached hour had to fit in the heap); the schema is given, as an
    # empty hour writes no file to infer it from
    staged = spark.read.schema(copied.schema).parquet(str(copy))
    stats, bad_lines = _input_stats(spark, copy, hashes_out)
    # later copies of a record included (an offset's rows are the same with or without
    # them, and those who count records drop them: `_count_resets_in_hour`, the decoders)
    readable = staged.where(F.col(BAD_FILE).isNull()).drop(BAD_FILE, VALUE_BYTES)
    bad = None
    if bad_lines:
        bad = staged.where(F.col(BAD_FILE).isNotNull()).select(
            "topic", F.col(BAD_FILE).alias("file"), F.col("value").alias("line")
        )
    tasks: list[TaskInput] = [*sorted(str(f) for f in copy.glob("*.parquet"))]
    return readable, bad, stats, tasks


def _every_record_sorted(records: DataFrame, unreadable: DataFrame | None) -> DataFrame:
    """Every record of the hour with its content hash, each partition's records in one task
    sorted by (offset, content hash, Kafka timestamp), and the unreadable JSON lines beside
    them (`BAD_FILE` set)."""
    # a record is a duplicate when its offset AND its content (key and value) were seen: the
    # same offset with other content is a topic re-created or a cluster moved (offset reset).
    # Sorted so, the copies of a record are neighbours, the earliest by Kafka timestamp first:
    # whoever reads the copy in order finds them by the row before (`copy_input`), and the
    # counters too (`_input_stats`). A window marking them here buffered every row
    # of each offset, values included: ~0.8 s of a 500k-message DataWorks hour's copy and
    # ~1.3 s of a Debezium one's (2 cores). A shuffle by Kafka partition, so the copy holds
    # each partition's records in one file, in the order its decoder reads them
    # (`recon.decode.input.copy_input`). Not into a set number of slices: adaptive execution then
    # packs the partitions into about a task per core, where 64 fixed slices ran 62 empty
    # write tasks for a 2-partition hour (~1.3 s, every hour)
    keys = ["topic", "partition", "offset", HASH]
    rest = [c for c in records.columns if c not in keys]
    copied = (
        records.withColumn(HASH, F.xxhash64("key", "value"))
        .repartition("topic", "partition")
        .sortWithinPartitions(*keys, "ts_ms")
        .select(
            *keys,
            *rest,
            F.lit(None).cast("string").alias(BAD_FILE),
            # the value's size, so the counters read a column of numbers, not the values
            F.coalesce(F.length("value"), F.lit(0)).alias(VALUE_BYTES),
        )  # fmt: skip
    )
    if unreadable is not None:
        # JSON lines that could not be read ride along in the same copy (their file in
        # `BAD_FILE`, their text as the value): the dumps are parsed once, and the quarantine
        # of unreadable lines costs a job only in an hour that has some
        copied = copied.unionByName(
            unreadable.select(
                "topic",
                F.col("file").alias(BAD_FILE),
                F.col("line").cast("binary").alias("value"),  # its bytes as read
            ),
            allowMissingColumns=True,
        )
    return copied


def _move_value_bytes(decoded: _Decoded, stats: dict[PartitionKey, dict[str, Any]]) -> None:
    """The value bytes the decoders counted of the partitions they read in place, from their
    stat rows to the partitions' input counters (`recon.decode.input.dump_input.dump_records`)."""
    for key, got in decoded.stats.items():
        n = got.pop(VALUE_BYTES_STAT, None)
        if n is not None:
            stats[key]["bytes"] = n


def _input_stats(
    spark: SparkSession, copy: Path, hashes_out: Path
) -> tuple[dict[PartitionKey, dict[str, Any]], int]:
    """The input counters per (topic, partition) of the hour's copy, and how many unreadable
    lines it holds: a task per file of the copy counts its rows as it reads them in order
    (`count_copy_files`: sorted so, a record's later copies and a repeated offset are the row
    before's), and only the counts reach the driver. An aggregate of Spark's needed the
    distinct offsets and contents per partition: three shuffles, ~2.3 s of a 500k-message
    hour, where a window marking the copies in the copy had cost ~0.8-1.3 s. The same read
    writes the records' offsets and content hashes for later hours to `hashes_out` (a Spark
    job of its own over the copy cost ~0.5 s of a 500k-message hour)."""
    stats: dict[PartitionKey, dict[str, Any]] = {}
    bad_lines = 0
    files = sorted(str(f) for f in copy.glob("*.parquet"))
    if not files:
        return stats, bad_lines

    def count(paths: Any) -> Any:
        return count_copy_files(paths, VALUE_BYTES, str(hashes_out))

    with job_named(spark, "decode: the input counters of the staging copy"):
        rows = spark.sparkContext.parallelize(files, len(files)).mapPartitions(count).collect()
    for aside in hashes_out.glob(f"{TMP_PREFIX}*"):  # of task attempts that failed
        aside.unlink()
    for r in rows:
        if r.pop("bad"):
            bad_lines += int(r["records"])
            continue
        key = (r["topic"], r["partition"])
        if key in stats:  # the copy's shuffle gives a partition to one task, one file
            raise RuntimeError(
                f"records of {key[0]}[{key[1]}] are in two files of the staging copy: its "
                "decoders would read them apart (a bug)"
            )
        stats[key] = r
    return stats, bad_lines


def _intervals_meeting_hour(
    layout: Layout, hour: datetime, stats: dict[PartitionKey, dict[str, Any]]
) -> pa.Table:
    """The intervals earlier hours read that meet this hour's offset range in their partition
    (usually none: then nothing more is read, and no Spark job runs)."""
    t = earlier_intervals(layout, hour)
    keep = None
    for (topic, part), st in stats.items():
        m = pc.and_(
            pc.and_(pc.equal(t["topic"], topic), pc.equal(t["partition"], part)),
            pc.and_(
                pc.greater_equal(t["hi"], st["min_offset"]),
                pc.less_equal(t["lo"], st["max_offset"]),
            ),
        )
        keep = m if keep is None else pc.or_(keep, m)
    return t.filter(keep) if keep is not None else t.slice(0, 0)


def _count_resets_in_hour(
    fresh: DataFrame, seen: DataFrame | None, resets: dict[PartitionKey, int]
) -> None:
    """One offset read more than once in this hour with other content (and not read by an
    earlier hour, whose resets are counted already): every copy after the first is a reset."""
    keys = ["topic", "partition", "offset"]
    contents = fresh.dropDuplicates([*keys, HASH])  # a record's later copies are not resets
    multi = contents.groupBy(*keys).agg(F.count("*").alias("n")).where(F.col("n") > 1)
    if seen is not None:
        multi = multi.join(seen.select(*keys).distinct(), keys, "left_anti")
    for r in multi.groupBy("topic", "partition").agg(F.sum(F.col("n") - 1).alias("x")).collect():
        key = (r["topic"], r["partition"])
        resets[key] = resets.get(key, 0) + int(r["x"])


def _drop_seen_records(
    spark: SparkSession,
    layout: Layout,
    hour: datetime,
    read: Callable[[], DataFrame],
    stats: dict[PartitionKey, dict[str, Any]],
    skip: Path,
) -> tuple[
    Callable[[], DataFrame], dict[PartitionKey, int], dict[PartitionKey, int], DataFrame | None
]:
    """Records an earlier hour already read (same offset, same content) are duplicates: drop
    and count them, and mark them in `skip` (every record at an offset an earlier hour read:
    topic, partition, offset, content hash, `SKIPPED`) for the decoders that read the copy. A
    record at an offset an earlier hour read with other content is new (a topic re-created, a
    cluster moved): kept, and counted as an offset reset. The offset intervals of earlier
    hours find the candidates (usually none); only the hours they point at have their content
    hashes read. `read` gives the hour's readable records (read only when an earlier hour's
    offsets meet the hour's). Returns (the fresh records, built on call; duplicates and
    resets per partition; the records at offsets earlier hours read)."""
    meeting = _intervals_meeting_hour(layout, hour, stats)
    if not meeting.num_rows:
        return read, {}, {}, None
    readable = read()
    iv = spark.createDataFrame(
        meeting.rename_columns(["topic", "partition", "lo", "hi", "_ivh"]).to_pylist(),
        "topic string, partition int, lo long, hi long, _ivh string",
    )
    cond = (
        (readable["topic"] == iv["topic"])
        & (readable["partition"] == iv["partition"])
        & readable["offset"].between(iv["lo"], iv["hi"])
    )
    keys = ["topic", "partition", "offset", HASH]
    seen = readable.join(F.broadcast(iv), cond, "inner").select(
        *[readable[k] for k in keys], iv["_ivh"]
    )
    hit = {
        (r["topic"], r["partition"], r["_ivh"]): r["n"]
        for r in seen.groupBy("topic", "partition", "_ivh").agg(F.count("*").alias("n")).collect()
    }
    if not hit:
        return read, {}, {}, None
    hours = sorted({h for _, _, h in hit})
    with_hashes = [h for h in hours if has_parquet(layout.offset_hashes(h))]
    # hours decoded before contents were kept: an offset they read is a duplicate, as before
    dup = seen.where(~F.col("_ivh").isin(with_hashes)).select(*keys)
    if with_hashes:
        hashes = spark.read.parquet(*[str(layout.offset_hashes(h)) for h in with_hashes])
        same = seen.join(hashes.select(*keys), keys, "left_semi").select(*keys)
        dup = dup.unionByName(same)
    dup, cross_dups, resets = _mark_seen(spark, seen.select(*keys).distinct(), dup, skip)
    return lambda: readable.join(dup, keys, "left_anti"), cross_dups, resets, seen


def _mark_seen(
    spark: SparkSession, seen: DataFrame, dup: DataFrame, skip: Path
) -> tuple[DataFrame, dict[PartitionKey, int], dict[PartitionKey, int]]:
    """`seen` (records at offsets earlier hours read) written to `skip`, those in `dup` (read
    by them: same content) marked `SKIPPED`; returns the duplicates' keys, read back, and the
    duplicates and resets per partition."""
    keys = list(dup.columns)
    dup = dup.distinct().withColumn(SKIPPED, F.lit(True))
    marked = seen.join(dup, keys, "left")  # SKIPPED null: a reset
    with job_named(spark, "decode: records earlier hours read, for the decoders to skip"):
        marked.write.parquet(str(skip))
    # read back (a few files): the counts and the fresh records do not join the hashes again
    marked = spark.read.schema(marked.schema).parquet(str(skip))
    counts: dict[PartitionKey, dict[str, int]] = defaultdict(dict)
    for r in (
        marked.groupBy("topic", "partition")
        .agg(
            F.count(F.col(SKIPPED)).alias("dups"),
            F.sum(F.when(F.col(SKIPPED).isNull(), 1).otherwise(0)).alias("resets"),
        )
        .collect()
    ):
        counts[(r["topic"], r["partition"])] = {"dups": int(r["dups"]), "resets": int(r["resets"])}
    cross_dups = {k: v["dups"] for k, v in counts.items() if v["dups"]}
    resets = {k: v["resets"] for k, v in counts.items() if v["resets"]}
    return marked.where(F.col(SKIPPED)).select(*keys), cross_dups, resets


def _decode_to_staging(
    spark: SparkSession, cfg: PipelineConfig, hour: datetime, inp: _Input, staging: Path
) -> list[dict[str, Any]]:
    """One decoder per (topic, partition), in offset order; output partitioned by row kind.
    Returns the summary rows of the unreadable dump lines it quarantined (`_spark_summary`)."""
    ctx = DecodeContext(
        tables=table_defs_before(cfg, hour),
        primary_keys={n: list(t.primary_key) for n, t in cfg.tables.items() if t.primary_key},
        max_record_bytes=cfg.max_record_bytes,
    )
    fmt, out = cfg.format, str(staging)
    if COPY_INPUT:
        files = _decode_copy(spark, fmt, ctx, inp, out)
    else:

        def decode_partition(batches: Any) -> Any:
            yield from write_task_files(decode_stream(batches, fmt, ctx, shapes=True), out)

        # one task per Kafka partition stream at most (each is decoded in order by one task)
        shuffle_parts = int(spark.conf.get("spark.sql.shuffle.partitions") or 8)
        n_parts = max(1, min(len(inp.stats), shuffle_parts))
        decoded = (
            inp.to_decode()
            .repartition(n_parts, "topic", "partition")
            .sortWithinPartitions("topic", "partition", "offset")
            .mapInArrow(decode_partition, FILE_ROWS_DDL)
        )
        with job_named(spark, "decode: the decoders (one task per Kafka partition)"):
            # one row per file the successful task attempts wrote (`recon.decode.tasks.task_files`)
            files = [(r["task"], r["kind"], r["path"]) for r in decoded.collect()]
    commit_task_files(files, staging)
    if inp.unreadable is None:
        return []
    with job_named(spark, "decode: unreadable dump lines to quarantine"):
        return _stage_unreadable(inp.unreadable, staging)


def _decode_copy(
    spark: SparkSession, fmt: str, ctx: DecodeContext, inp: _Input, out: str
) -> list[tuple[int, str, str]]:
    """The decoders over the copy's files, a task per file (`recon.decode.input.copy_input`), and
    one for the partitions that only have carried-in records. Returns the file rows of the
    successful task attempts (`recon.decode.tasks.task_files`)."""
    tasks = list(inp.tasks)
    carry = None if inp.carry_in is None else str(inp.carry_in)
    skip = None if inp.skip is None else str(inp.skip)
    carried_only: list[PartitionKey] = []
    if carry is not None:
        in_carry = pq.read_table(carry, columns=["topic", "partition"]).group_by(
            ["topic", "partition"]
        )
        parts = in_carry.aggregate([]).to_pylist()
        carried_only = sorted({(r["topic"], r["partition"]) for r in parts} - set(inp.stats))
        if carried_only:
            tasks.append(None)
    if not tasks:
        return []

    hashes = Path(out) / "offset_hashes"  # written here by the partitions read in place

    def decode_files(groups: Any) -> Any:
        items = chain.from_iterable(groups)
        return decode_task_inputs(items, fmt, ctx, carry, carried_only, out, skip, str(hashes))

    sizes = {k: int(st["records"]) for k, st in inp.stats.items()}
    groups = packed(tasks, sizes, spark.sparkContext.defaultParallelism)
    rdd = spark.sparkContext.parallelize(groups, len(groups)).mapPartitions(decode_files)
    with job_named(spark, "decode: the decoders (a task per core, or per staging file)"):
        rows = rdd.collect()
    for aside in hashes.glob(f"{TMP_PREFIX}*"):  # of task attempts that failed
        aside.unlink()
    return rows


def _stage_unreadable(unreadable: DataFrame, staging: Path) -> list[dict[str, Any]]:
    """Dump lines that could not be read at all join the quarantine, with their text; returns
    their summary rows."""
    bad = unreadable.select(
        F.lit("quarantine").alias("kind"),
        "topic",
        F.lit(-1).alias("partition"),
        F.lit(-1).cast("long").alias("offset"),
        F.concat(F.lit("unreadable dump line in "), F.col("file")).alias("reason"),
        F.col("line").alias("raw_value"),
    )
    output = from_arrow_schema(OUTPUT_SCHEMA)
    for f in OUTPUT_SCHEMA:
        if f.name not in bad.columns:
            bad = bad.withColumn(f.name, F.lit(None).cast(output[f.name].dataType))
    out_cols = [f.name for f in OUTPUT_SCHEMA]
    bad.select(*out_cols).write.mode("append").partitionBy("kind").parquet(str(staging))
    return _spark_summary(bad)


def _pair_across_partitions(
    spark: SparkSession, staging: Path
) -> tuple[dict[PartitionKey, int], list[dict[str, Any]]]:
    """Records a decoder carried with a `pairable` event (a DataWorks UPDATE_BEFOR waiting for
    its UPDATE_AFTER) whose partner came in another partition of the hour (an AFTER of the
    same table and sequenceId that found no BEFOR): their event joins the hour's events and
    they leave the carry. A topic partitioned by primary key does this to every update that
    changes the key. Returns how many per (topic, partition) of the carried record, and the
    summary rows of the events they add (`_spark_summary`)."""
    shadows, events = staging / "kind=pairable", staging / "kind=event"
    if not (has_parquet(shadows) and has_parquet(events)):
        return {}, []
    seq = F.substring("order_key", 1, 16)  # the sequenceId part of the order key
    lonely_afters = (
        spark.read.parquet(str(events))
        .where((F.col("op") == "update") & F.col("before").isNull())
        .select("db", "tbl", seq.alias("_seq"))
        .distinct()
    )
    pairable = spark.read.parquet(str(shadows))
    matched = pairable.withColumn("_seq", seq).join(
        lonely_afters, ["db", "tbl", "_seq"], "left_semi"
    )
    coords = matched.select("topic", "partition", "offset").persist()
    counts = {
        (r["topic"], r["partition"]): int(r["n"])
        for r in coords.groupBy("topic", "partition").agg(F.count("*").alias("n")).collect()
    }
    added: list[dict[str, Any]] = []
    if counts:
        matched = matched.drop("_seq")
        added = _spark_summary(matched.withColumn("kind", F.lit("event")))
        matched.write.mode("append").parquet(str(events))
        carry = staging / "kind=carry"
        kept = spark.read.parquet(str(carry)).join(
            coords, ["topic", "partition", "offset"], "left_anti"
        )
        kept.write.parquet(str(staging / "carry_kept"))
        shutil.rmtree(carry)
        (staging / "carry_kept").rename(carry)
    coords.unpersist()
    shutil.rmtree(shadows)
    return counts, added


def _count_paired(decoded: _Decoded, paired: dict[PartitionKey, int]) -> None:
    """The paired records were carried out by their decoder; now they are consumed."""
    for key, n in paired.items():
        st = decoded.stats[key]
        st[Stat.RECORDS_CARRIED_OUT] = st.get(Stat.RECORDS_CARRIED_OUT, 0) - n
        st[Stat.UPDATE_BEFOR_CARRIED] = st.get(Stat.UPDATE_BEFOR_CARRIED, 0) - n
        st[Stat.RECORDS_CONSUMED] = st.get(Stat.RECORDS_CONSUMED, 0) + n
        st[Stat.UPDATE_BEFOR_PAIRED_ACROSS_PARTITIONS] = n


def _is_ddl() -> Column:
    """An output row of a DDL statement: a DDL event, or a DDL that could not be read (it was
    quarantined, and still leaves its table unreadable)."""
    is_event, is_quarantine = F.col("kind") == "event", F.col("kind") == "quarantine"
    return (is_event & (F.col("op") == "ddl")) | (is_quarantine & F.col("ddl").isNotNull())


def _spark_summary(staged: DataFrame) -> list[dict[str, Any]]:
    """The summary rows (`recon.decode.summary.summary_rows`) of output rows Spark wrote
    (`kind`: event or quarantine), in one aggregate: unreadable dump lines, and the events
    of updates paired across partitions."""
    is_event = F.col("kind") == "event"
    counted = staged.groupBy(
        "kind",
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        F.when(is_event, F.col("op")).otherwise(F.col("reason")).alias("name"),
        F.when(is_event, F.col("db")).alias("db"),
        F.when(is_event, F.col("tbl")).alias("tbl"),
        *shape_keys(among=is_event),
    ).agg(
        F.count("*").alias("n"),
        F.max(_is_ddl()).alias("ddl_seen"),
        F.max(F.when(is_event, F.col("event_time_ms"))).alias("newest"),
    )
    return [r.asDict() for r in with_shape_texts(counted).collect()]


def _read_staged(spark: SparkSession, staging: Path, extra: list[dict[str, Any]]) -> _Decoded:
    """The decoders' counters, the events per operation and shape (`recon.decode.summary`), the
    quarantine's reasons and the newest source time per table, added up from the decode tasks'
    summaries and the `extra` rows (`_spark_summary`); then the hour's DDL statements, read from
    the staged output only when there are any."""
    stats: dict[PartitionKey, dict[str, int]] = defaultdict(dict)
    events_by_op: dict[str, int] = defaultdict(int)
    reasons: dict[str, int] = {}
    shapes: list[EventShape] = []
    newest: dict[str, int] = {}
    superseded: list[SupersededCount] = []
    value_classes: list[ValueClassCount] = []
    tasks = sorted((staging / f"kind={SUMMARY}").glob("*.json"))
    has_ddl = False
    # added up by what they count: each (partition, counter) and each reason comes once
    for r in summary_rows([*chain.from_iterable(map(read_json, tasks)), *extra]):
        n = int(r["n"])
        if r["kind"] == "stat":
            stats[(r["topic"], r["partition"])][r["name"]] = n
        elif r["kind"] == VALUES:
            column, cls = json.loads(r["name"])
            value_classes.append(
                {"db": r["db"], "tbl": r["tbl"], "column": column, "cls": cls, "n": n}
            )
        elif r["kind"] == SUPERSEDED:
            superseded.append({"db": r["db"], "tbl": r["tbl"], "op": r["name"], "n": n})
        elif r["kind"] == "event":
            events_by_op[r["name"]] += n
            shapes.append(_shape(r, n))
            if r["newest"] is not None:  # the table named as Spark's `concat_ws` names it
                table = ".".join(part for part in (r["db"], r["tbl"]) if part is not None)
                newest[table] = max(newest.get(table, r["newest"]), r["newest"])
        else:
            reasons[r["name"]] = n
        has_ddl = has_ddl or r["ddl_seen"]
    ddls = _staged_ddls(spark, staging) if has_ddl else []
    unreadable = sum(n for r, n in reasons.items() if r.startswith("unreadable dump line"))
    shapes.sort(key=lambda s: tuple(str(v) for v in s.values()))
    superseded.sort(key=lambda c: tuple(str(v) for v in c.values()))
    value_classes.sort(key=lambda c: tuple(str(v) for v in c.values()))
    return _Decoded(
        stats, dict(events_by_op), ddls, reasons, unreadable, shapes, newest, superseded,
        value_classes,
    )  # fmt: skip


def _staged_ddls(spark: SparkSession, staging: Path) -> list[tuple[str, str, str]]:
    """The hour's DDL statements (db, table, statement) in source order: the DDL events, and
    the DDL of records quarantined as they could not be read (it still leaves its table
    unreadable)."""
    kinds = [k for k in ("event", "quarantine") if (staging / f"kind={k}").exists()]
    staged = spark.read.option("basePath", str(staging)).parquet(
        *[str(staging / f"kind={k}") for k in kinds]
    )
    rows = staged.where(_is_ddl()).select("order_key", "db", "tbl", "ddl").collect()
    rows.sort(key=lambda r: (r["order_key"] is not None, r["order_key"] or b""))  # nulls first
    return [(r["db"], r["tbl"], r["ddl"]) for r in rows]


def _shape(row: dict[str, Any], n: int) -> EventShape:
    shape: dict[str, Any] = {"db": row["db"], "tbl": row["tbl"], "op": row["name"], "n": n}
    shape.update((f, row[f]) for f in SHAPE_FIELDS)
    return shape  # type: ignore[return-value]


def _write_offset_intervals(
    spark: SparkSession, stats: dict[PartitionKey, dict[str, Any]], out: Path, hashes: Path
) -> None:
    """Offsets seen this hour, as intervals, for later hours' dedupe (the content hash read at
    each offset is in `hashes`, written as the input counters were counted: `_input_stats`;
    read back only where a later hour meets the offset). A partition whose offsets have no
    gap (its distinct offsets fill its range, which the input counters know) is one interval;
    only partitions with gaps are found by Spark (gaps-and-islands), from `hashes`. A
    record's later copies in the hour (rare) are in `hashes` too: its readers look offsets
    and contents up, and a row more of one changes neither."""
    whole, gappy = [], []
    for key, st in sorted(stats.items()):
        if st["distinct_offsets"] == st["max_offset"] - st["min_offset"] + 1:
            whole.append((*key, st["min_offset"], st["max_offset"]))
        else:
            gappy.append(key)
    if gappy:
        # the intervals from what was just written, not from the dumps again
        seen = spark.read.parquet(str(hashes))
        pairs = [F.struct(F.lit(t), F.lit(p)) for t, p in gappy]
        w = Window.partitionBy("topic", "partition").orderBy("offset")
        intervals = (
            seen.where(F.struct("topic", "partition").isin(pairs))
            .select("topic", "partition", "offset")
            .withColumn("island", F.col("offset") - F.dense_rank().over(w))
            .groupBy("topic", "partition", "island")
            .agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"))
            .drop("island")
        )
        with job_named(spark, "decode: offset intervals"):
            intervals.coalesce(1).write.parquet(str(out))
    out.mkdir(parents=True, exist_ok=True)
    if whole:
        rows = [dict(zip(INTERVALS.names, w, strict=True)) for w in whole]
        pq.write_table(pa.Table.from_pylist(rows, schema=INTERVALS), out / "part-whole.parquet")


def _publish_outputs(layout: Layout, hour: datetime, staging: Path) -> None:
    # the counters say "decoded": gone while the outputs are replaced one by one, so a run
    # killed in between leaves an hour that is not decoded, never old and new outputs mixed
    layout.decode_counters(hour).unlink(missing_ok=True)
    replace_dir(staging / "kind=event", layout.events(hour))
    replace_dir(staging / f"kind={WINNER}", layout.winners(hour))
    replace_dir(staging / "kind=carry", layout.carry(hour))
    replace_dir(staging / "kind=quarantine", layout.quarantine(hour))
    replace_dir(staging / "offsets", layout.offsets(hour))
    replace_dir(staging / "offset_hashes", layout.offset_hashes(hour))


def _partition_counters(
    key: PartitionKey,
    counted: dict[str, Any],
    decoder: dict[str, int],
    cross_dups: int,
    resets: int,
) -> PartitionCounters:
    records = int(counted.get("records") or 0)
    return {
        "topic": key[0],
        "partition": key[1],
        "records": records,
        "bytes": int(counted.get("bytes") or 0),
        "min_offset": counted.get("min_offset"),
        "max_offset": counted.get("max_offset"),
        "duplicates_in_hour": records - int(counted.get("distinct") or 0),
        "duplicates_cross_hour": int(cross_dups),
        "offset_resets": int(resets),
        "decoder": dict(sorted(decoder.items())),
    }


def _counters(
    cfg: PipelineConfig, hour: datetime, run_id: str, inp: _Input, decoded: _Decoded
) -> DecodeCounters:
    partitions = [
        _partition_counters(
            key,
            inp.stats.get(key, {}),
            decoded.stats.get(key, {}),
            inp.cross_dups.get(key, 0),
            inp.resets.get(key, 0),
        )
        for key in sorted(set(inp.stats) | set(decoded.stats))
    ]
    totals: dict[str, int] = defaultdict(int)
    for p in partitions:
        for stat in (
            Stat.RECORDS,
            Stat.BYTES,
            Stat.DUPLICATES_IN_HOUR,
            Stat.DUPLICATES_CROSS_HOUR,
            Stat.OFFSET_RESETS,
        ):
            totals[stat] += int(p[stat.value])  # type: ignore[literal-required]
        for name, v in p["decoder"].items():
            if not is_detail(name):
                totals[name] += v
    totals[Stat.UNREADABLE_LINES] = decoded.unreadable_lines
    totals[Stat.RECORDS_CONSUMED] += 0  # present even when 0: the audit counts it independently
    return {
        "pipeline": cfg.name,
        "hour": hour_text(hour),
        "run_id": run_id,
        "format": cfg.format,
        "previous_hour_decoded": cfg.layout.decode_counters(hour - timedelta(hours=1)).is_file(),
        "previous_carried_out": _previous_carried_out(cfg, hour),
        "carried_in_available": inp.carried_in_available,
        "totals": {str(k): v for k, v in sorted(totals.items())},
        "events_by_op": dict(sorted(decoded.events_by_op.items())),
        "ddl": [sql for _, _, sql in decoded.ddls],
        "quarantine_reasons": dict(sorted(decoded.quarantine_reasons.items())),
        "partitions": partitions,
        "newest_event_ms": dict(sorted(decoded.newest.items())),
    }


def _previous_carried_out(cfg: PipelineConfig, hour: datetime) -> int | None:
    prev = cfg.layout.decode_counters(hour - timedelta(hours=1))
    if hour <= cfg.start or not prev.is_file():
        return None
    doc: DecodeCounters = read_json(prev)
    return int(doc["totals"].get(Stat.RECORDS_CARRIED_OUT, 0))
