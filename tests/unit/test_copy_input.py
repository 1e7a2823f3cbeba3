"""The decode tasks' reading of the staging copy (`recon.decode.input.copy_input`): the copy marks no
later copies of a record; sorted by (topic, partition, offset, content hash, Kafka timestamp),
a later copy is the row before's, and a repeated offset too. Read a few rows at a time, the
counters, the records kept and the offsets and hashes written for later hours equal those of
the whole file counted in Python (hypothesis)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recon.core.model import RAW_SCHEMA
from recon.decode.input import copy_input
from recon.decode.input.copy_input import BAD_FILE, CONTENT_HASH, copy_records, count_copy_files
from recon.decode.stream import RawRun, flat_records
from tests.support.examples import examples

_ROWS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),  # topic
        st.integers(0, 1),  # partition
        st.integers(0, 4),  # offset
        st.integers(0, 2),  # content hash
        st.integers(0, 3),  # Kafka timestamp
    ),
    max_size=25,
)


def _copy_file(rows: list[tuple[Any, ...]], bad: int, path: Path) -> None:
    """A copy file as the decode stage writes it: sorted, then `bad` unreadable lines."""
    rows = sorted(rows)
    n = len(rows) + bad
    cols: dict[str, Any] = {f.name: pa.nulls(n, f.type) for f in RAW_SCHEMA}
    cols["topic"] = pa.array([r[0] for r in rows] + ["a"] * bad, pa.string())
    cols["partition"] = pa.array([r[1] for r in rows] + [None] * bad, pa.int32())
    cols["offset"] = pa.array([r[2] for r in rows] + [None] * bad, pa.int64())
    cols["ts_ms"] = pa.array([r[4] for r in rows] + [None] * bad, pa.int64())
    cols["value"] = pa.array([f"{r}".encode() for r in rows] + [b"x"] * bad, pa.binary())
    cols["carried"] = pa.array([False] * n)
    cols[CONTENT_HASH] = pa.array([r[3] for r in rows] + [None] * bad, pa.int64())
    cols[BAD_FILE] = pa.array([None] * len(rows) + ["dump.json"] * bad, pa.string())
    cols["_value_bytes"] = pa.array([len(cols["value"][i].as_py()) for i in range(n)], pa.int64())
    pq.write_table(pa.table(cols), path)


@settings(max_examples=examples(150), deadline=None)
@given(rows=_ROWS, bad=st.integers(0, 2), batch=st.integers(1, 4))
def test_copy_counters_and_records_kept_equal_the_whole_file_counted(
    rows: list[tuple[Any, ...]], bad: int, batch: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("copy") / "part-0.parquet"
    _copy_file(rows, bad, path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(copy_input, "_BATCH_ROWS", batch)  # neighbours across batches too
        hashes = path.parent / "hashes"
        counted = list(count_copy_files(iter([str(path)]), "_value_bytes", str(hashes)))
        kept = [(r.topic, r.partition, r.offset, r.ts_ms) for r in copy_records(str(path), {})]
        runs = list(copy_records(str(path), {}, runs=True))  # as the decode tasks read it
    # a run per partition of each batch, of the records one by one
    assert all(type(r) is RawRun for r in runs)
    assert [tuple(rec.topic for rec in r.records()) for r in runs] == [
        (r.cols[0][r.start],) * (r.end - r.start)
        for r in runs  # type: ignore[union-attr]
    ]
    assert [(r.topic, r.partition, r.offset, r.ts_ms) for r in flat_records(runs)] == kept
    expected: dict[tuple[Any, ...], dict[str, Any]] = {}
    for t, p in sorted({r[:2] for r in rows}):
        mine = [r for r in rows if r[:2] == (t, p)]
        expected[(t, p, False)] = {
            "records": len(mine),
            "distinct": len({r[2:4] for r in mine}),
            "distinct_offsets": len({r[2] for r in mine}),
            "bytes": sum(len(f"{r}".encode()) for r in mine),
            "min_offset": min(r[2] for r in mine),
            "max_offset": max(r[2] for r in mine),
        }
    got = {(r.pop("topic"), r.pop("partition"), r.pop("bad")): r for r in counted}
    if bad:
        assert got.pop(("a", None, True))["records"] == bad
    assert got == expected
    # the earliest by Kafka timestamp of each record's copies, in the copy's order
    first: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for r in sorted(rows):
        first.setdefault(r[:4], (r[0], r[1], r[2], r[4]))
    assert kept == list(first.values())
    # every record's offset and content hash, for later hours, under the copy file's name
    written = [p.name for p in hashes.iterdir()]
    assert written == ([path.name] if rows else [])
    if rows:
        got_hashes = pq.read_table(hashes / path.name).to_pylist()
        assert [tuple(r.values()) for r in got_hashes] == [r[:4] for r in sorted(rows)]
