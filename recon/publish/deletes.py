"""Iceberg v2 position-delete files, committed through pyiceberg: merge-on-read's publish side.

A merge-on-read hour (`write_mode: merge-on-read`, `recon.merge.stage`) appends its changed
rows' data files and, in the same snapshot, position-delete files naming the rows they replace
(a data file's path and a row's place in it, which Spark reads as `_metadata.row_index`); a
copy-on-write hour, or a bucket's compaction, replaces whole buckets' files and drops their
delete files.

pyiceberg 0.12 reads position deletes (its scan applies them) but writes none: its deletes
fall back to copy-on-write (apache/iceberg-python#1078, #3618). `append_with_deletes` is a fast
append whose snapshot also adds a manifest of DELETES content holding the delete files. It
builds on pyiceberg's snapshot producer and manifest writer, which are not public API: its test
holds them to the pinned version.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.table import FileScanTask, Table, Transaction
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.table.update.snapshot import _OverwriteFiles
from pyiceberg.typedef import Record
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recon.objstore import is_s3, local_copies, mirrored

# the Iceberg spec's reserved field ids of a position-delete file's columns
FILE_PATH_ID = 2147483546
POS_ID = 2147483545

POSITION_DELETE_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": str(FILE_PATH_ID)}),
        pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": str(POS_ID)}),
    ]
)


def write_position_deletes(
    table: Table, location: str, rows: pa.Table, partition: Record, spec_id: int = 0
) -> DataFile:
    """A position-delete file at `location` (a URI the table's FileIO writes: the warehouse's
    file system or object store) of `rows` (`file_path`, `pos`: the rows deleted), sorted as
    the spec requires (by path, then position), for data files of `partition`."""
    if table.format_version != 2:  # v1 has no deletes; v3 writes deletion vectors instead
        raise ValueError(
            f"table {table.name()} is Iceberg v{table.format_version}: position-delete files "
            "are written for v2 tables only"
        )
    rows = rows.select(["file_path", "pos"]).cast(POSITION_DELETE_SCHEMA)
    rows = rows.sort_by([("file_path", "ascending"), ("pos", "ascending")])
    with table.io.new_output(location).create() as out:
        pq.write_table(rows, out)
    return _delete_file(
        table, location, partition, rows.num_rows, len(table.io.new_input(location)), spec_id
    )


def _delete_file(
    table: Table, location: str, partition: Record, rows: int, size: int, spec_id: int
) -> DataFile:
    """A position-delete file's record (not `referenced_data_file`: a file may delete rows of
    several data files). Its spec id is set apart: `from_args` leaves it out (it is not
    written in the manifest), and pyiceberg's summary of a snapshot removing it reads it."""
    df = DataFile.from_args(
        _table_format_version=table.format_version,
        content=DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=partition,
        record_count=rows,
        file_size_in_bytes=size,
    )
    df.spec_id = spec_id
    return df


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _ReplaceFiles(_OverwriteFiles):
    """An overwrite whose snapshot also adds `add_deletes` (position-delete files) and drops
    `drop_deletes` (delete files of data files it removes). pyiceberg's own overwrite keeps
    every delete manifest as it is, and would rewrite one that lost entries as a data manifest:
    this one rewrites it as a delete manifest (`_DeleteManifestWriter`)."""

    def __init__(
        self, add_deletes: Sequence[DataFile], drop_deletes: Sequence[DataFile], **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._add_deletes = list(add_deletes)
        self._drop_deletes = list(drop_deletes)

    def _delete_writer(self, spec_id: int) -> _DeleteManifestWriter:
        return _DeleteManifestWriter(
            spec=self.spec(spec_id),
            schema=self.schema(),
            output_file=self.new_manifest_output(),
            snapshot_id=self._snapshot_id,
            avro_compression=self._compression,
        )

    def _existing_manifests(self) -> list[ManifestFile]:
        manifests = super()._existing_manifests()
        drop = {d.file_path for d in self._drop_deletes}
        if not drop:
            return manifests
        out = []
        for m in manifests:
            if m.content != ManifestContent.DELETES:
                out.append(m)
                continue
            entries = m.fetch_manifest_entry(io=self._io, discard_deleted=True)
            keep = [e for e in entries if e.data_file.file_path not in drop]
            if len(keep) == len(entries):
                out.append(m)
            elif keep:
                with self._delete_writer(m.partition_spec_id) as writer:
                    for e in keep:
                        writer.add_entry(
                            ManifestEntry.from_args(
                                status=ManifestEntryStatus.EXISTING,
                                snapshot_id=e.snapshot_id,
                                sequence_number=e.sequence_number,
                                file_sequence_number=e.file_sequence_number,
                                data_file=e.data_file,
                            )
                        )
                out.append(writer.to_manifest_file())
        return out

    def _manifests(self) -> list[ManifestFile]:
        manifests = super()._manifests()
        if not self._add_deletes:
            return manifests
        with self._delete_writer(self._transaction.table_metadata.default_spec_id) as writer:
            for df in self._add_deletes:
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=self._snapshot_id,
                        sequence_number=None,
                        file_sequence_number=None,
                        data_file=df,
                    )
                )
        return [*manifests, writer.to_manifest_file()]

    def _summary(self, snapshot_properties: dict[str, str] | None = None) -> Summary:
        """pyiceberg's summary counts the data files added and removed; the delete files join
        it (`added-delete-files`, `added-position-deletes`, `removed-position-deletes`, and the
        totals)."""
        added, removed = self._added_data_files, self._deleted_data_files
        self._added_data_files = [*added, *self._add_deletes]
        self._deleted_data_files = {*removed, *self._drop_deletes}
        try:
            return super()._summary(snapshot_properties or {})
        finally:
            self._added_data_files, self._deleted_data_files = added, removed


@dataclass
class FileChanges:
    """What one snapshot removes and adds: data files and position-delete files."""

    add_data: Sequence[DataFile] = ()
    remove_data: Sequence[DataFile] = ()
    add_deletes: Sequence[DataFile] = ()
    remove_deletes: Sequence[DataFile] = ()

    def __bool__(self) -> bool:
        return bool(self.add_data or self.remove_data or self.add_deletes or self.remove_deletes)


def replace_files(
    tx: Transaction,
    io: FileIO,
    files: FileChanges,
    snapshot_properties: dict[str, str] | None = None,
) -> None:
    """In transaction `tx`, one snapshot that removes and adds data and delete files
    (`FileChanges`): an OVERWRITE when it removes or deletes a row, else an APPEND."""
    replaces = bool(files.remove_data or files.add_deletes or files.remove_deletes)
    producer = _ReplaceFiles(
        files.add_deletes,
        files.remove_deletes,
        operation=Operation.OVERWRITE if replaces else Operation.APPEND,
        transaction=tx,
        io=io,
        snapshot_properties=snapshot_properties or {},
    )
    with producer:
        for df in files.remove_data:
            producer.delete_data_file(df)
        for df in files.add_data:
            producer.append_data_file(df)


def append_with_deletes(
    table: Table,
    data_files: Sequence[DataFile],
    deletes: Sequence[DataFile],
    snapshot_properties: dict[str, str] | None = None,
) -> int | None:
    """One snapshot (an OVERWRITE: rows are replaced) adding `data_files` and the position
    `deletes`; returns its id."""
    tx = table.transaction()
    replace_files(tx, table.io, FileChanges(data_files, (), deletes), snapshot_properties)
    snapshot_id = tx.table_metadata.current_snapshot_id
    tx.commit_transaction()
    return snapshot_id


def local_form(path: Column, mirror: Path) -> Column:
    """A file's path in one form whoever wrote it: a local file as a bare absolute path (Spark's
    `_metadata.file_path` reads `file:/x`, pyiceberg's manifests hold `file:///x` or `/x`), an
    object as the path of its copy in `mirror` (`recon.objstore.mirrored`, the copy Spark
    reads); other schemes are left as they are."""
    copy = str(mirror).rstrip("/").replace("\\", "\\\\").replace("$", "\\$") + "/"
    return F.regexp_replace(F.regexp_replace(path, r"^file:/+", "/"), r"^s3://", copy)


def spark_local_form(path: Column, mirror: Path) -> Column:
    """`local_form` of a path as Spark's `_metadata.file_path` names a file: a URI, whose path
    is percent-encoded (`%20` a space, `%25` a percent sign, a plus sign as it is), decoded
    first (`url_decode` reads `+` as a space, so it is encoded before). A table's manifests
    name its files as they are: without it, no position of a folder named so was found."""
    decoded = F.url_decode(F.replace(path, F.lit("+"), F.lit("%2B")))
    return local_form(F.when(path.contains("%"), decoded).otherwise(path), mirror)


def placed_rows(
    spark: SparkSession,
    tasks: Sequence[FileScanTask],
    mirror: Path,
    columns: Sequence[str],
    among: tuple[DataFrame, list[str]] | None = None,
    schema: str | None = None,
) -> DataFrame:
    """`columns` of the tasks' data files, each row with its file's path (`_del_path`, in
    `local_form`) and its place in it (`_del_pos`), position deletes applied (an anti-join on
    the two). A position delete names its data file by path, and no later file takes that
    path, so the tasks' delete files are applied to all their data files at once. `among`:
    (rows, columns) only the rows with those columns' values in rows are kept (a semi-join,
    the rows sent to every task), before the paths are put in form and the deletes applied,
    so both cost what the kept rows cost, not what the files hold (a 20M-row table's
    positions of 1M keys, warm, with `key_texts`: 7.0-11.5 s against 14.3-19.8 s). A table
    on S3 is read from its files' copies in `mirror` (fetched when missing)."""
    data = local_copies([t.file.file_path for t in tasks], mirror)
    # `schema` (DDL): the files read as it says, a narrower type widened (an INT column of an
    # older file read as BIGINT), where merging the files' own schemas refuses to
    reader = spark.read.schema(schema) if schema else spark.read.option("mergeSchema", "true")
    df = reader.parquet(*[str(p) for p in data])
    placed = df.select(
        *columns,
        F.col("_metadata.file_path").alias("_del_path"),
        F.col("_metadata.row_index").alias("_del_pos"),
    )
    if among is not None:
        rows, on = among
        placed = placed.join(F.broadcast(rows), on, "left_semi")
    placed = placed.withColumn("_del_path", spark_local_form(F.col("_del_path"), mirror))
    deletes = sorted({d.file_path for t in tasks for d in t.delete_files})
    if not deletes:
        return placed
    copies = [str(p) for p in local_copies(deletes, mirror)]
    deleted = spark.read.parquet(*copies).select(
        local_form(F.col("file_path"), mirror).alias("_del_path"), F.col("pos").alias("_del_pos")
    )
    return placed.join(deleted, ["_del_path", "_del_pos"], "left_anti")


def read_snapshot_files(
    spark: SparkSession, table: Table, mirror: Path, snapshot_id: int | None = None
) -> DataFrame | None:
    """A snapshot's rows read by Spark from its data files, its position deletes applied; None
    when it has no data file. `mirror`: where a table on S3 has its files' copies."""
    tasks = list(table.scan(snapshot_id=snapshot_id).plan_files())
    if not tasks:
        return None
    return placed_rows(spark, tasks, mirror, ["*"]).drop("_del_path", "_del_pos")


def live_positions(
    spark: SparkSession,
    tasks: Sequence[FileScanTask],
    mirror: Path,
    columns: Sequence[str],
    among: tuple[DataFrame, list[str]] | None = None,
) -> DataFrame:
    """The rows the tasks' data files still publish (of those `among` keeps: `placed_rows`):
    `columns`, and each row's `file_path` (as the table's manifests name its file) and `pos`,
    the two a position delete names it by."""
    return (
        placed_rows(spark, tasks, mirror, columns, among)
        .join(F.broadcast(_named(spark, tasks, mirror)), "_del_path")
        .select(*columns, "file_path", F.col("_del_pos").alias("pos"))
    )


def rows_and_positions(
    spark: SparkSession, tasks: Sequence[FileScanTask], mirror: Path, schema: str
) -> DataFrame:
    """Every row the tasks' data files still publish, in the columns of `schema` (DDL), each
    with its `file_path` and `pos` (`live_positions` of whole rows)."""
    return (
        placed_rows(spark, tasks, mirror, ["*"], schema=schema)
        .join(F.broadcast(_named(spark, tasks, mirror)), "_del_path")
        .withColumnRenamed("_del_pos", "pos")
        .drop("_del_path")
    )


def _named(spark: SparkSession, tasks: Sequence[FileScanTask], mirror: Path) -> DataFrame:
    """Each data file's path in `local_form` (`_del_path`) beside its manifests' name for it
    (`file_path`)."""
    return spark.createDataFrame(
        sorted({(_local(t.file.file_path, mirror), t.file.file_path) for t in tasks}),
        "_del_path string, file_path string",
    )


def _local(path: str, mirror: Path) -> str:
    """`local_form` of one path, in Python."""
    if is_s3(path):
        return str(mirrored(path, mirror))
    return re.sub(r"^file:/+", "/", path)


def write_delete_files(
    spark: SparkSession,
    table: Table,
    positions: DataFrame,
    out: Path,
    name: Callable[[Path], str] = str,
) -> list[DataFile]:
    """Spark writes position-delete files of `positions` (`file_path`, `pos`, and the bucket
    of their data files, `_cdc_bucket`) into folder `out`, one a bucket (a delete file belongs
    to its data files' partition), sorted by path and position as the spec requires, with the
    spec's reserved field ids; the files, for the commit, each with its path as `name` gives it
    (an object's URI, for a table on S3)."""
    if table.format_version != 2:
        raise ValueError(
            f"table {table.name()} is Iceberg v{table.format_version}: position-delete files "
            "are written for v2 tables only"
        )
    ids = {"file_path": FILE_PATH_ID, "pos": POS_ID}
    (
        positions.select(
            *[F.col(c).alias(c, metadata={"parquet.field.id": i}) for c, i in ids.items()],
            F.col("_cdc_bucket").alias("_pb"),
        )
        .repartition("_pb")
        .sortWithinPartitions("file_path", "pos")
        .write.mode("errorifexists")
        .partitionBy("_pb")
        .parquet(str(out))
    )
    spec_id = table.spec().spec_id
    files = []
    for p in sorted(out.glob("_pb=*/*.parquet")):
        bucket = int(p.parent.name.removeprefix("_pb="))
        rows = pq.read_metadata(p).num_rows  # the footer only
        size = p.stat().st_size
        files.append(_delete_file(table, name(p), Record(bucket), rows, size, spec_id))
    return files
