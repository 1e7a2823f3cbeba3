"""Spark reads a published snapshot's rows with its position deletes applied
(`recon.publish.deletes.read_snapshot_files`, which the audit's reconcile reads through): the
same rows pyiceberg's own scan reads, at the snapshot with deletes and at the one before."""

from __future__ import annotations

from pathlib import Path

from pyiceberg.table import Table
from pyiceberg.table import _parquet_files_to_data_files as to_data_files
from pyspark.sql import SparkSession

from recon.publish.deletes import append_with_deletes, read_snapshot_files, write_position_deletes
from tests.support.position_deletes import (
    current,
    new_rows_file,
    partition,
    positions,
    uri,
)


def spark_rows(spark: SparkSession, t: Table, snapshot_id: int | None = None) -> dict[int, str]:
    df = read_snapshot_files(spark, t, Path("/no-mirror"), snapshot_id)  # a local table
    assert df is not None
    got = [(r["id"], r["v"]) for r in df.select("id", "v").collect()]
    assert len({i for i, _ in got}) == len(got), f"a key read twice: {sorted(got)}"
    return dict(got)


def test_spark_reads_what_pyiceberg_reads_with_the_deletes_applied(
    spark: SparkSession,
    table: Table,  # noqa: F811
    tmp_path: Path,
) -> None:
    before = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    changed = {1, 2, 7}
    deletes = [
        write_position_deletes(table, uri(tmp_path, f"del-{b}"), pos, partition(table, b))
        for b, pos in sorted(positions(table, changed).items())
    ]
    new = [
        new_rows_file(table, tmp_path, [i for i in sorted(changed) if i % 2 == b], "w", b)
        for b in (0, 1)
    ]
    append_with_deletes(table, list(to_data_files(table.metadata, new, table.io)), deletes)
    table.refresh()
    want = {i: ("w" if i in changed else "v") + str(i) for i in range(10)}
    assert current(table) == want
    assert spark_rows(spark, table) == want
    assert spark_rows(spark, table, before) == {i: f"v{i}" for i in range(10)}
