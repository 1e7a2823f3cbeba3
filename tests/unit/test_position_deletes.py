"""Position-delete files committed through pyiceberg (`recon.publish.deletes`), read back by
pyiceberg's own scan: the replaced rows gone, the new ones in, the snapshot before unchanged,
and the snapshot's summary counting the deletes. It builds on pyiceberg's private snapshot
producer, so this test also holds it to the pinned version."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFileContent, ManifestContent
from pyiceberg.table import Table
from pyiceberg.table import _parquet_files_to_data_files as to_data_files
from pyiceberg.typedef import Record

from recon.publish.deletes import (
    FileChanges,
    append_with_deletes,
    replace_files,
    write_position_deletes,
)
from tests.support.position_deletes import (
    SCHEMA,
    current,
    new_rows_file,
    partition,
    positions,
    uri,
)


def test_replaced_rows_are_deleted_by_position_and_the_new_ones_read(
    table: Table, tmp_path: Path
) -> None:
    before_id = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    changed = {2, 4, 5}  # buckets 0 and 1
    where = positions(table, changed)
    deletes = [
        write_position_deletes(table, uri(tmp_path, f"del-{b}"), pos, partition(table, b))
        for b, pos in sorted(where.items())
    ]
    new = [
        new_rows_file(table, tmp_path, [i for i in sorted(changed) if i % 2 == b], "w", b)
        for b in (0, 1)
    ]
    data = list(to_data_files(table.metadata, new, table.io))
    snap = append_with_deletes(table, data, deletes, {"recon.hour": "2026-01-01T01"})
    table.refresh()
    assert table.current_snapshot().snapshot_id == snap  # type: ignore[union-attr]
    want = {i: ("w" if i in changed else "v") + str(i) for i in range(10)}
    assert current(table) == want
    # the snapshot before still reads what it held: time travel and rollback keep working
    assert current(table, before_id) == {i: f"v{i}" for i in range(10)}
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary.operation.value == "overwrite"
    assert summary["added-position-deletes"] == "3"
    assert summary["added-delete-files"] == "2"
    assert summary["added-data-files"] == "2"
    assert summary["added-records"] == "3"
    assert summary["recon.hour"] == "2026-01-01T01"
    # engines that match deletes by partition (Spark's and Trino's Iceberg) read the manifest
    # list's content, the manifest's own header, and each delete file's partition
    added = [
        m for m in table.current_snapshot().manifests(table.io)  # type: ignore[union-attr]
        if m.added_snapshot_id == snap
    ]  # fmt: skip
    kinds = sorted(m.content.name for m in added)
    assert kinds == ["DATA", "DELETES"]
    (dm,) = [m for m in added if m.content == ManifestContent.DELETES]
    with open(dm.manifest_path.removeprefix("file://"), "rb") as f:
        assert b"content\x0edeletes" in f.read(4096)  # Avro metadata: key, then value
    entries = dm.fetch_manifest_entry(table.io)
    assert {e.data_file.content for e in entries} == {DataFileContent.POSITION_DELETES}
    assert sorted(e.data_file.partition[0] for e in entries) == [0, 1]
    for e in entries:
        paths = pq.read_table(e.data_file.file_path.removeprefix("file://"))["file_path"]
        (target,) = {
            t.file for t in table.scan(snapshot_id=before_id).plan_files()
            if t.file.file_path in paths.to_pylist()
        }  # fmt: skip
        assert e.data_file.partition == target.partition


def test_a_delete_file_reaches_only_its_partitions_data_files(table: Table, tmp_path: Path) -> None:
    """A position delete names a data file's path, and is filed under a partition: rows of the
    same place in another bucket's file stay."""
    where = positions(table, {4})
    (b, pos), = where.items()  # fmt: skip
    d = write_position_deletes(table, uri(tmp_path, "del"), pos, partition(table, b))
    append_with_deletes(table, [], [d])
    table.refresh()
    assert current(table) == {i: f"v{i}" for i in range(10) if i != 4}
    # an append of data files alone is an APPEND, as pyiceberg's own would be
    more = list(
        to_data_files(table.metadata, [new_rows_file(table, tmp_path, [10], "v", 0)], table.io)
    )
    append_with_deletes(table, more, [])
    table.refresh()
    assert table.current_snapshot().summary.operation.value == "append"  # type: ignore[union-attr]
    assert current(table) == {i: f"v{i}" for i in range(11) if i != 4}


def test_only_a_v2_table_gets_position_delete_files(tmp_path: Path) -> None:
    cat = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "wh").as_uri())
    cat.create_namespace("n")
    v1 = cat.create_table("n.v1", SCHEMA, properties={"format-version": "1"})
    some = pa.table({"file_path": ["f"], "pos": [0]})
    with pytest.raises(ValueError, match="Iceberg v1: position-delete files are written for v2"):
        write_position_deletes(v1, uri(tmp_path, "d"), some, Record())


def test_a_bucket_rewritten_drops_its_delete_files_and_keeps_the_others(
    table: Table, tmp_path: Path
) -> None:
    """A bucket rewritten whole (copy-on-write, a compaction) removes its data files and their
    delete files; the other bucket's delete file, filed in the same delete manifest, stays in
    force (its manifest rewritten as a manifest of deletes, not of data)."""
    changed = {2, 5}  # bucket 0 and bucket 1
    deletes = [
        write_position_deletes(table, uri(tmp_path, f"del-{b}"), pos, partition(table, b))
        for b, pos in sorted(positions(table, changed).items())
    ]
    append_with_deletes(table, [], deletes)
    table.refresh()
    tasks = list(table.scan().plan_files())
    b0 = [t.file for t in tasks if t.file.partition[0] == 0]
    b0_deletes = [d for d in deletes if d.partition[0] == 0]
    rewritten = new_rows_file(table, tmp_path, [0, 2, 4, 6, 8], "r", 0)
    tx = table.transaction()
    files = FileChanges(
        list(to_data_files(table.metadata, [rewritten], table.io)), b0, remove_deletes=b0_deletes
    )
    replace_files(tx, table.io, files, {"recon.hour": "2026-01-01T02"})
    tx.commit_transaction()
    table.refresh()
    want = {i: ("r" if i % 2 == 0 else "v") + str(i) for i in range(10) if i != 5}
    assert current(table) == want
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None
    assert snap.summary["total-delete-files"] == "1"
    assert snap.summary["total-position-deletes"] == "1"
    live = [
        (m.content, e.data_file.content, e.data_file.partition[0])
        for m in snap.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True)
        if e.data_file.content != DataFileContent.DATA
    ]
    assert live == [(ManifestContent.DELETES, DataFileContent.POSITION_DELETES, 1)]
