"""A small partitioned Iceberg table in a SQLite catalog, and what its versions hold: for the
tests of position-delete files (`recon.publish.deletes`)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.name_mapping import create_mapping_from_schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "v", StringType(), required=False),
    NestedField(3, "_cdc_bucket", IntegerType(), required=False),
)
ARROW = pa.schema([("id", pa.int64()), ("v", pa.string()), ("_cdc_bucket", pa.int32())])


def rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table(
        {"id": ids, "v": [f"{tag}{i}" for i in ids], "_cdc_bucket": [i % 2 for i in ids]},
        schema=ARROW,
    )


@pytest.fixture
def table(tmp_path: Path) -> Table:
    cat = SqlCatalog(
        "t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "wh").resolve().as_uri()
    )
    cat.create_namespace("n")
    spec = PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "_cdc_bucket"))
    mapping = {"schema.name-mapping.default": create_mapping_from_schema(SCHEMA).model_dump_json()}
    t = cat.create_table("n.t", SCHEMA, partition_spec=spec, properties=mapping)
    t.append(rows(list(range(10)), "v"))
    return cat.load_table("n.t")


def current(t: Table, snapshot_id: int | None = None) -> dict[int, str]:
    got = t.scan(snapshot_id=snapshot_id).to_arrow().to_pylist()
    assert len({r["id"] for r in got}) == len(got), f"a key read twice: {got}"
    return {r["id"]: r["v"] for r in got}


def positions(t: Table, ids: set[int]) -> dict[int, pa.Table]:
    """Per bucket, the (file_path, pos) of the rows of `ids` in the table's data files."""
    out: dict[int, list[tuple[str, int]]] = {}
    for task in t.scan().plan_files():
        path = task.file.file_path
        for pos, i in enumerate(pq.read_table(path.removeprefix("file://"))["id"].to_pylist()):
            if i in ids:
                out.setdefault(i % 2, []).append((path, pos))
    return {
        b: pa.table({"file_path": [p for p, _ in ps], "pos": [n for _, n in ps]})
        for b, ps in out.items()
    }


def uri(tmp_path: Path, name: str) -> str:
    return (tmp_path / "wh" / f"{name}.parquet").resolve().as_uri()


def partition(t: Table, bucket: int) -> Record:
    return next(f.file.partition for f in t.scan().plan_files() if f.file.partition[0] == bucket)


def new_rows_file(t: Table, tmp_path: Path, ids: list[int], tag: str, bucket: int) -> str:
    path = tmp_path / "wh" / f"new-{tag}-{bucket}.parquet"
    pq.write_table(rows(ids, tag), path)
    return path.resolve().as_uri()
