"""Reading an hour's Parquet dumps in place (`recon.decode.input.dump_input`): a dump file is read in
place only when each partition's offsets rise in it (read a few rows at a time, across
batches); the hour only when its files' ranges of a partition are apart and few partitions
share a file. What the decoders then read of a partition is its records in offset order, less
those an earlier hour read; the counters and the offsets and hashes written are those of the
whole hour counted in Python (hypothesis)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from recon.decode.input import dump_input
from recon.decode.input.dump_input import (
    content_hashes,
    count_dump_files,
    dump_records,
    dumps_in_place,
    readable_in_place,
)
from recon.decode.input.dumps import KAFKA_PARQUET_SCHEMA
from recon.decode.stream import BinaryRows
from tests.support.examples import examples

_FILES = st.lists(  # each file: its rows (topic or None for the folder's, partition, offset)
    st.lists(
        st.tuples(st.sampled_from(["a", None]), st.integers(0, 2), st.integers(0, 30)),
        max_size=12,
    ),
    min_size=1,
    max_size=3,
)


def _dump(
    rows: list[tuple[Any, ...]], path: Path, schema: pa.Schema = KAFKA_PARQUET_SCHEMA
) -> None:
    n = len(rows)
    cols: dict[str, Any] = {f.name: pa.nulls(n, f.type) for f in schema}
    cols["topic"] = pa.array([r[0] for r in rows], pa.string())
    cols["partition"] = pa.array([r[1] for r in rows], schema.field("partition").type)
    cols["offset"] = pa.array([r[2] for r in rows], pa.int64())
    cols["key"] = pa.array([None if r[2] % 3 == 0 else b"k%d" % r[2] for r in rows], pa.binary())
    cols["value"] = pa.array([b"v%d-%d" % (r[1], r[2]) for r in rows], pa.binary())
    cols["timestamp"] = pa.array(
        [1_700_000_000_000 + r[2] for r in rows], schema.field("timestamp").type
    )
    pq.write_table(pa.table(cols, schema=schema), path)


def _counted(files: list[list[tuple[Any, ...]]], folder: Path, batch: int) -> list[dict]:
    paths = []
    for i, rows in enumerate(files):
        paths.append(folder / f"part-{i}.parquet")
        _dump(rows, paths[-1])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dump_input, "_COUNT_ROWS", batch)  # offsets compared across batches too
        items = [(str(p), "t") for p in paths]
        return list(count_dump_files(iter(items)))


def _in_order(rows: list[tuple[Any, ...]]) -> bool:
    last: dict[tuple[str, int], int] = {}
    for t, p, o in rows:
        if o <= last.get((t or "t", p), -1):
            return False
        last[(t or "t", p)] = o
    return True


def _arranged(files: list[list[tuple[Any, ...]]], how: str) -> list[list[tuple[Any, ...]]]:
    """As drawn; each file's records in offset order, once each; or all of them in offset
    order, once each, cut into runs (as Spark's Kafka source writes them)."""
    if how == "drawn":
        return files
    if how == "each":
        return [sorted(dict.fromkeys(f), key=lambda r: r[2]) for f in files]
    seen: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for t, p, o in (r for f in files for r in f):
        seen.setdefault((t or "t", p, o), (t, p, o))
    every = sorted(seen.values(), key=lambda r: r[2])
    cut = -(-len(every) // len(files)) or 1
    return [every[i : i + cut] for i in range(0, max(len(every), 1), cut)]


@settings(max_examples=examples(200), deadline=None)
@given(files=_FILES, how=st.sampled_from(["drawn", "each", "runs"]), batch=st.integers(1, 5))
def test_an_hour_is_read_in_place_only_in_order_and_then_counted_as_a_whole(
    files: list[list[tuple[Any, ...]]],
    how: str,
    batch: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    files = _arranged(files, how)
    folder = tmp_path_factory.mktemp("dumps")
    rows = _counted(files, folder, batch)
    # each file alone: in order when each partition's offsets rise in it
    by_file = {r["file"]: r["in_order"] for r in rows}
    for i, f in enumerate(files):
        if f:
            assert by_file[str(folder / f"part-{i}.parquet")] is _in_order(f)
    found = dumps_in_place(rows)
    every = [(t or "t", p, o) for f in files for t, p, o in f]
    parts = {(t, p) for t, p, _ in every}
    ranges_apart = all(
        _apart(
            [[o for t, p, o in ((t or "t", p, o) for t, p, o in f) if (t, p) == key] for f in files]
        )
        for key in parts
    )
    reads = sum(len(f) * len({(t or "t", p) for t, p, _ in f}) for f in files)
    if not (all(_in_order(f) for f in files) and ranges_apart and reads <= 2 * len(every)):
        assert found is None
        return
    assert found is not None
    event("read in place")
    stats, slices = found
    for key in parts:
        offs = sorted(o for t, p, o in every if (t, p) == key)
        st_ = stats[key]
        assert (st_["records"], st_["min_offset"], st_["max_offset"]) == (
            len(offs),
            offs[0],
            offs[-1],
        )
        assert st_["distinct"] == st_["distinct_offsets"] == len(offs)
    # the decoders read each partition in offset order, the folder's topic for a null one;
    # they count its value bytes and write its offsets and content hashes, nothing aside
    hashes, value_bytes = folder / "hashes", {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dump_input, "_BATCH_ROWS", batch)
        got = [
            (r.topic, r.partition, r.offset)
            for s in slices
            for r in dump_records(s, {}, str(hashes), value_bytes)
        ]
    assert got == sorted(every)
    assert value_bytes == {
        key: sum(len(b"v%d-%d" % (key[1], o)) for t, p, o in every if (t, p) == key)
        for key in parts
    }
    written = pq.read_table(hashes).to_pylist() if every else []
    assert not list(hashes.glob("_tmp-*"))
    want = [(r.topic, r.partition, r.offset, r.key, r.value) for s in slices for r in _all(s)]
    assert sorted(
        (r["topic"], r["partition"], r["offset"], r["_content_hash"]) for r in written
    ) == sorted(
        (t, p, o, content_hashes(pa.array([k], pa.binary()), pa.array([v], pa.binary()))[0].as_py())
        for t, p, o, k, v in want
    )


_BYTES = st.none() | st.binary(max_size=80)  # XXH64's 32-byte stripes, 8-, 4- and 1-byte tails


@settings(max_examples=examples(300), deadline=None)
@given(rows=st.lists(st.tuples(_BYTES, _BYTES), max_size=12), data=st.data())
def test_the_c_hashes_are_the_xxhash_packages(rows: list[Any], data: st.DataObject) -> None:
    """The content hashes in C (`_run_hashes.c`) of a run's keys and values, as lists and as
    rows of Arrow arrays (slices of them, rows picked in any order, NULLs), are the `xxhash`
    package's: XXH64 of the key from Spark's seed, then of the value from that, a NULL left
    out."""
    assert dump_input._run_hashes is not None, "make setup builds the C modules"
    want = np.array([dump_input._hash(k, v) for k, v in rows], np.uint64).view(np.int64).tolist()
    keys, values = [k for k, _ in rows], [v for _, v in rows]
    assert dump_input._hashes(keys, values).to_pylist() == want
    pad = data.draw(st.integers(0, 3))
    karr = pa.array([b"pad"] * pad + keys, pa.binary()).slice(pad)
    varr = pa.array([None] * pad + values, pa.binary()).slice(pad)
    pick = np.array(data.draw(st.permutations(range(len(rows)))), np.int64)
    got = dump_input._hashes(BinaryRows(karr, pick), BinaryRows(varr, pick)).to_pylist()
    assert got == [want[i] for i in pick]
    assert content_hashes(karr, varr).to_pylist() == want
    assert list(BinaryRows(varr, pick)) == [values[i] for i in pick] == BinaryRows(varr, pick)[:]
    assert [BinaryRows(karr)[i] for i in range(len(rows))] == keys


def test_the_c_hashes_take_no_row_past_the_arrays_buffers() -> None:
    """A row number past its array, in what the C loops are given, reads as a NULL (a bug in
    the caller never reads past the buffers); what is neither a list nor `BinaryRows.native`
    raises."""
    assert dump_input._run_hashes is not None, "make setup builds the C modules"
    value = pa.array([b"v"], pa.binary())
    native = BinaryRows(value, np.array([0, 1, -1], np.int64)).native
    got = dump_input._run_hashes.hashes([None] * 3, native, 42)
    seed_only, with_v = 42, dump_input._hash(None, b"v")
    assert np.frombuffer(got, np.uint64).tolist() == [with_v, seed_only, seed_only]
    with pytest.raises(TypeError, match="list or BinaryRows.native"):
        dump_input._run_hashes.hashes([None], (value.buffers()[1],), 42)
    with pytest.raises(ValueError, match="different lengths"):
        dump_input._run_hashes.hashes([None], [None, None], 42)
    with pytest.raises(TypeError, match="not large_binary"):  # int64 offsets: not for C
        BinaryRows(pa.array([b"v"], pa.large_binary()))


def _all(part: Any) -> list[Any]:
    """A partition's records read in place, with no hashes or bytes kept."""
    with tempfile.TemporaryDirectory() as tmp:
        return list(dump_records(part, {}, tmp, {}))


def _apart(runs: list[list[int]]) -> bool:
    spans = sorted((min(r), max(r)) for r in runs if r)
    return all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_what_the_decoders_read_leaves_out_the_records_an_earlier_hour_read(tmp_path: Path) -> None:
    rows = [("a", 0, o) for o in range(6)] + [("a", 1, o) for o in range(4)]
    _dump(rows, tmp_path / "d.parquet")
    part = (0, "a", 0, ((str(tmp_path / "d.parquet"), "a", False),))
    key = pa.array([None, b"k1"], pa.binary())
    value = pa.array([b"v0-0", b"v0-1"], pa.binary())
    h0, h1 = content_hashes(key, value).to_pylist()
    # offset 0 read before with this content, offset 1 with other content (kept: a reset)
    skip = {("a", 0): {(0, h0), (1, h1 + 1)}}
    got = [(r.offset, r.ts_ms, r.value) for r in dump_records(part, skip, str(tmp_path), {})]
    assert got == [(o, 1_700_000_000_000 + o, b"v0-%d" % o) for o in range(1, 6)]


@pytest.mark.parametrize(
    ("field", "typ"),
    [
        ("partition", pa.int64()),  # Spark would cast it
        ("timestamp", pa.timestamp("ms")),  # no time zone: Spark reads it as a local time
        ("timestamp", pa.timestamp("ns", tz="UTC")),
        ("key", pa.string()),
    ],
)
def test_a_dump_of_other_column_types_takes_the_staging_copy(
    tmp_path: Path, field: str, typ: pa.DataType
) -> None:
    i = KAFKA_PARQUET_SCHEMA.get_field_index(field)
    schema = KAFKA_PARQUET_SCHEMA.set(i, pa.field(field, typ))
    assert readable_in_place(KAFKA_PARQUET_SCHEMA) and not readable_in_place(schema)
    path = tmp_path / "d.parquet"
    n = 3
    cols = {f.name: pa.nulls(n, f.type) for f in schema}
    cols["partition"] = pa.array([0, 0, 0], schema.field("partition").type)
    cols["offset"] = pa.array([1, 2, 3], pa.int64())
    pq.write_table(pa.table(cols, schema=schema), path)
    rows = list(count_dump_files(iter([(str(path), "t")])))
    assert rows == [{"file": str(path), "in_order": False}]
    assert dumps_in_place(rows) is None


def test_a_null_partition_or_offset_takes_the_staging_copy(tmp_path: Path) -> None:
    for col in ("partition", "offset"):
        path = tmp_path / f"{col}.parquet"
        cols = {f.name: pa.nulls(2, f.type) for f in KAFKA_PARQUET_SCHEMA}
        cols["partition"], cols["offset"] = pa.array([0, 0], pa.int32()), pa.array([1, 2])
        cols[col] = pa.array([0, None], cols[col].type)
        pq.write_table(pa.table(cols, schema=KAFKA_PARQUET_SCHEMA), path)
        rows = list(count_dump_files(iter([(str(path), "t")])))
        assert rows == [{"file": str(path), "in_order": False}]


@pytest.mark.parametrize(("micros", "in_place"), [(0, True), (-2_208_988_800_000_001, False)])
def test_an_int96_time_before_1900_takes_the_staging_copy(
    tmp_path: Path, micros: int, in_place: bool
) -> None:
    """Spark reads an INT96 time before 1900 by its calendar settings (a rebase, or an
    error): only Spark reads such a dump (the staging copy)."""
    schema = KAFKA_PARQUET_SCHEMA.set(5, pa.field("timestamp", pa.timestamp("us", tz="UTC")))
    cols = {f.name: pa.nulls(2, f.type) for f in schema}
    cols["partition"], cols["offset"] = pa.array([0, 0], pa.int32()), pa.array([1, 2])
    cols["timestamp"] = pa.array([micros, None], schema.field("timestamp").type)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table(cols, schema=schema), path, use_deprecated_int96_timestamps=True)
    assert pq.ParquetFile(path).schema.column(5).physical_type == "INT96"
    rows = list(count_dump_files(iter([(str(path), "t")])))
    assert all(r["in_order"] is in_place for r in rows) and rows
    if in_place:
        (part,) = dumps_in_place(rows)[1]  # type: ignore[index]
        (rec,) = list(dump_records(part, {}, str(tmp_path / "h"), {}))[:1]
        assert rec.ts_ms == micros // 1000


@given(
    sizes=st.lists(st.integers(0, 1_000), max_size=40),
    copies=st.integers(0, 3),
    carried_only=st.booleans(),
    bins=st.integers(1, 8),
)
@example(sizes=[0, 0, 0], copies=0, carried_only=False, bins=3)
def test_partitions_read_in_place_are_packed_into_a_task_per_core(
    sizes: list[int], copies: int, carried_only: bool, bins: int
) -> None:
    """Every input is in one task, once: a copy file and the carried-only partitions (None)
    each in a task of their own; the partitions read in place in at most `bins` tasks, each
    task's in the hour's order, and no task more than the largest partition over an even
    share of the records (each partition, the largest first, went to the task with the
    fewest)."""
    from recon.decode.tasks.decode_tasks import packed

    slices = [(n, "t", p, ((f"f{p}", "t", True),)) for n, p in enumerate(range(len(sizes)))]
    size = {("t", p): s for p, s in enumerate(sizes)}
    inputs: list[Any] = [*slices, *(f"copy-{i}" for i in range(copies))]
    inputs += [None] if carried_only else []
    groups = packed(inputs, size, bins)
    flat = [item for g in groups for item in g]
    assert sorted(map(repr, flat)) == sorted(map(repr, inputs))
    alone = [g for g in groups if not isinstance(g[0], tuple)]
    assert all(len(g) == 1 for g in alone) and len(alone) == copies + carried_only
    in_place = [g for g in groups if isinstance(g[0], tuple)]
    assert len(in_place) == min(bins, len(slices))
    for g in in_place:
        assert all(isinstance(s, tuple) for s in g) and g == sorted(g)
        load = sum(size[("t", s[2])] for s in g)
        assert load <= sum(sizes) / len(in_place) + max(sizes)
