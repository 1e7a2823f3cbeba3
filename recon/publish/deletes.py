"""Iceberg v2 position-delete files, committed through pyiceberg: merge-on-read's publish side.

Not used by the merge yet (its copy-on-write publish replaces whole buckets' files; README,
"Session 54's measurements"). A merge-on-read hour would append its changed rows' data files
and, in the same snapshot, position-delete files naming the rows they replace (a data file's
path and a row's place in it, which Spark reads as `_metadata.row_index`).

pyiceberg 0.12 reads position deletes (its scan applies them) but writes none: its deletes
fall back to copy-on-write (apache/iceberg-python#1078, #3618). `append_with_deletes` is a fast
append whose snapshot also adds a manifest of DELETES content holding the delete files. It
builds on pyiceberg's snapshot producer and manifest writer, which are not public API: its test
holds them to the pinned version.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
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
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import Record
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

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
    return DataFile.from_args(
        _table_format_version=table.format_version,
        content=DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=partition,
        record_count=rows.num_rows,
        file_size_in_bytes=len(table.io.new_input(location)),
        spec_id=spec_id,
        # not `referenced_data_file`: a file may delete rows of several data files
    )


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _AppendWithDeletes(_FastAppendFiles):
    """A fast append whose snapshot also adds `deletes` (position-delete files)."""

    def __init__(self, deletes: Sequence[DataFile], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._deletes = list(deletes)

    def _manifests(self) -> list[ManifestFile]:
        manifests = super()._manifests()
        if not self._deletes:
            return manifests
        meta = self._transaction.table_metadata
        with _DeleteManifestWriter(
            spec=meta.spec(),
            schema=self.schema(),
            output_file=self.new_manifest_output(),
            snapshot_id=self._snapshot_id,
            avro_compression=self._compression,
        ) as writer:
            for df in self._deletes:
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
        """pyiceberg's summary counts the added data files; the delete files join it (their
        counts: `added-delete-files`, `added-position-deletes`, `total-position-deletes`)."""
        added = self._added_data_files
        self._added_data_files = [*added, *self._deletes]
        try:
            return super()._summary(snapshot_properties or {})
        finally:
            self._added_data_files = added


def append_with_deletes(
    table: Table,
    data_files: Sequence[DataFile],
    deletes: Sequence[DataFile],
    snapshot_properties: dict[str, str] | None = None,
) -> int | None:
    """One snapshot (an OVERWRITE: rows are replaced) adding `data_files` and the position
    `deletes`; returns its id."""
    tx = table.transaction()
    producer = _AppendWithDeletes(
        deletes,
        operation=Operation.OVERWRITE if deletes else Operation.APPEND,
        transaction=tx,
        io=table.io,
        snapshot_properties=snapshot_properties or {},
    )
    with producer:
        for df in data_files:
            producer.append_data_file(df)
    snapshot_id = tx.table_metadata.current_snapshot_id
    tx.commit_transaction()
    return snapshot_id


def _iceberg_uri(path: Column) -> Column:
    """Spark's `_metadata.file_path` of a local file (`file:/x`, or `file:///x`) as Iceberg's
    manifests and position deletes name it (`file:///x`); other schemes are left as they are."""
    return F.regexp_replace(path, r"^file:/+", "file:///")


def read_snapshot_files(
    spark: SparkSession, table: Table, snapshot_id: int | None = None
) -> DataFrame | None:
    """A snapshot's rows read by Spark from its data files, its position deletes applied (an
    anti-join on the data file and the row's place in it); None when it has no data file. A
    position delete names its data file by path, and no later file takes that path, so the
    snapshot's delete files are applied to all its data files at once."""
    tasks = list(table.scan(snapshot_id=snapshot_id).plan_files())
    if not tasks:
        return None
    df = spark.read.option("mergeSchema", "true").parquet(*[t.file.file_path for t in tasks])
    deletes = sorted({d.file_path for t in tasks for d in t.delete_files})
    if not deletes:
        return df
    deleted = spark.read.parquet(*deletes).select(
        F.col("file_path").alias("_del_path"), F.col("pos").alias("_del_pos")
    )
    placed = df.select(
        "*",
        _iceberg_uri(F.col("_metadata.file_path")).alias("_del_path"),
        F.col("_metadata.row_index").alias("_del_pos"),
    )
    return placed.join(deleted, ["_del_path", "_del_pos"], "left_anti").drop(
        "_del_path", "_del_pos"
    )
