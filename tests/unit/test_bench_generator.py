"""The speed benchmark's generator (benchmarks/gen.py) writes messages recon's own decoders read
without a quarantine, whose fold is the table the plan says (rows, values of a row), and which
the naive job's parser reads the same way; a broken template or slot would show here before it
skewed a benchmark."""

from __future__ import annotations

import base64
import itertools
import re
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from benchmarks.formats import KINDS
from benchmarks.gen import (
    DELETE,
    KEY0,
    SHAPES,
    STATUSES,
    b64,
    cut_to_messages,
    digits,
    hour_start,
    plan,
    varint5,
    write_hour,
)
from benchmarks.paths import _decode_tencent
from recon.core.ddl import parse_create_table
from recon.core.model import RawRecord
from recon.decode.base import DecodeContext
from recon.decode.stream import decode_records
from recon.demo.reference_fold import fold, table_rows
from recon.demo.sample import CREATE_SQL

HOUR = hour_start("2026-03-02T10")


def test_fixed_width_renderings() -> None:
    assert digits(np.array([7, 1234567]), 7).tobytes() == b"00000071234567"
    with pytest.raises(ValueError):
        digits(np.array([12345678]), 7)
    raw = np.array([[1, 2, 3, 4], [255, 0, 9, 200]], np.uint8)
    assert [bytes(r) for r in b64(raw)] == [base64.b64encode(bytes(r)) for r in raw]
    v = np.array([2**28, 2**35 - 1, 1_772_445_600])
    for x, enc in zip(v, varint5(v), strict=True):
        n, shift = 0, 0
        for byte in enc:
            n |= (int(byte) & 0x7F) << shift
            shift += 7
        assert n == x and enc[-1] < 0x80 and all(b >= 0x80 for b in enc[:-1])


def _records(root: Path) -> list[RawRecord]:
    files = sorted(root.rglob("part-*.parquet"))
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    return [
        RawRecord(r["topic"], r["partition"], r["offset"], r["key"], r["value"], 0) for r in rows
    ]


@pytest.mark.parametrize("fmt", sorted(KINDS))
def test_recon_decodes_what_the_generator_writes_into_the_planned_table(
    tmp_path: Path, fmt: str
) -> None:
    kinds = KINDS[fmt]()
    p = cut_to_messages(plan(HOUR, 3000, keys=400, delete_share=0.3, partitions=2), kinds, 3000)
    counts = write_hour(p, kinds, tmp_path, "bench", rows_per_file=700)
    recs = _records(tmp_path)
    assert counts["messages"] == len(recs) <= 3000 and len(recs) > 2900
    # offsets per partition are 0..n-1 with no gap
    for part in (0, 1):
        offs = sorted(r.offset for r in recs if r.partition == part)
        assert offs == list(range(len(offs)))
    ctx = DecodeContext(tables={"shop.orders": parse_create_table(CREATE_SQL)[2]})
    out = decode_records(recs, fmt, ctx).to_pylist()
    assert not [r["reason"] for r in out if r["kind"] == "quarantine"]
    assert not [r for r in out if r["kind"] == "carry"]
    events = [r for r in out if r["kind"] == "event"]
    assert {e["op"] for e in events} == {"insert", "update", "delete"}
    # a GTID is one transaction's (`uuid:N`) as producers write it, not a set (`uuid:1-N`): the
    # audit's GTID facts then see numbers, as they would in production
    gtids = [e["gtid"] for e in events if e["gtid"]]
    assert all(re.fullmatch(r"[0-9a-f-]{36}:[0-9]+", g) for g in gtids), gtids[:3]
    rows = table_rows(fold(events))["shop.orders"]
    assert len(rows) == p.expected_rows() > 100
    # the last after-image of a live key is its row
    last: dict[int, int] = {}
    for i, k in enumerate(p.key):
        last[int(k)] = i
    live = [i for i in last.values() if p.op[i] != DELETE]
    i = max(live)
    row = next(r for r in rows if r["id"] == str(KEY0 + p.key[i]))
    assert Decimal(row["amount"]) == Decimal(int(p.amount[i])) / 100
    assert row["status"] == STATUSES[p.status[i]].tobytes().decode()
    assert row["customer"] == f"c{KEY0 + p.key[i]}"


def test_the_naive_protobuf_udf_reads_the_generated_changes(tmp_path: Path) -> None:
    kinds = KINDS["tencent_dts_pb"]()
    p = plan(HOUR, 500, keys=100, delete_share=0.5, partitions=1)
    write_hour(p, kinds, tmp_path, "bench")
    recs = sorted(_records(tmp_path), key=lambda r: r.offset)
    rows = [row for r in recs for row in _decode_tencent(r.value)]
    assert [r[0] for r in rows] == [int(KEY0 + k) for k in p.key]
    assert [r[2] for r in rows] == [bool(op == DELETE) for op in p.op]


def test_repeated_runs_of_a_path_count_as_their_median() -> None:
    """`make bench` with `--repeat`: a path's time is the median of its runs (a slow minute
    of the machine does not make the cell), its peak the highest, and runs whose row counts
    differ stop the bench."""
    from benchmarks.run import median_of

    def run(s: float, mb: float, rows: int = 7) -> dict:
        return {"seconds": s, "peak": {"total_mb": mb}, "rows": rows}

    three = median_of([run(30.0, 900), run(21.0, 1200), run(22.5, 800)])
    assert three == {"seconds": 22.5, "runs_seconds": [30.0, 21.0, 22.5],
                     "peak": {"total_mb": 1200}, "rows": 7}  # fmt: skip
    assert median_of([run(10.0, 1), run(12.0, 2)])["seconds"] == 11.0
    assert median_of([run(9.0, 1)])["seconds"] == 9.0
    with pytest.raises(SystemExit, match="different row counts"):
        median_of([run(1.0, 1, rows=7), run(1.0, 1, rows=8)])


def test_a_file_per_partition_holds_the_same_records_each_partition_in_offset_order(
    tmp_path: Path,
) -> None:
    """The Kafka Connect layout (`file_per_partition`): the records of the default layout, each
    file one partition's, its offsets rising, the files of a partition holding ranges apart."""
    kinds = KINDS["dataworks_json"]()
    p = cut_to_messages(plan(HOUR, 3000, keys=400, delete_share=0.3, partitions=3), kinds, 3000)
    write_hour(p, kinds, tmp_path / "mixed", "bench", rows_per_file=700)
    write_hour(p, kinds, tmp_path / "sink", "bench", rows_per_file=700, file_per_partition=True)
    key = lambda r: (r.partition, r.offset, r.value)  # noqa: E731
    assert sorted(map(key, _records(tmp_path / "sink"))) == sorted(
        map(key, _records(tmp_path / "mixed"))
    )
    ranges: dict[int, list[tuple[int, int]]] = {}
    for f in sorted((tmp_path / "sink").rglob("*.parquet")):
        t = pq.read_table(f, columns=["partition", "offset"])
        (part,) = set(t.column("partition").to_pylist())
        offs = t.column("offset").to_pylist()
        assert offs == sorted(offs) and len(set(offs)) == len(offs)
        ranges.setdefault(part, []).append((offs[0], offs[-1]))
    assert sorted(ranges) == [0, 1, 2]
    for spans in ranges.values():
        spans.sort()
        assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))


def test_each_shape_puts_its_hours_changes_on_keys_as_it_says() -> None:
    """`make bench`'s hour shapes (`SHAPES`): `distinct` changes each key once (every change an
    insert), `zipf` about 1.3 times with a few hot keys, `hot` spreads them over `keys`."""
    n = 20_000
    distinct = plan(HOUR, n, keys=100, shape="distinct")
    assert len(np.unique(distinct.key)) == n and set(distinct.op.tolist()) == {0}
    zipf = plan(HOUR, n, keys=100, shape="zipf")
    per_key = np.bincount(zipf.key)
    assert 1.25 < n / np.count_nonzero(per_key) < 1.35 and per_key.max() > 100
    assert np.median(per_key[per_key > 0]) == 1
    hot = plan(HOUR, n, keys=100, shape="hot")
    assert len(np.unique(hot.key)) == 100
    assert SHAPES == ("hot", "zipf", "distinct")


def test_a_spread_hour_holds_the_same_records_out_of_kafkas_order(tmp_path: Path) -> None:
    """`+spread`: the records of the Kafka-order layout, spread over the files at random, each
    file out of offset order; and recon decodes them into the planned table all the same."""
    kinds = KINDS["debezium_json"]()
    p = cut_to_messages(plan(HOUR, 3000, keys=400, delete_share=0.3, shape="zipf"), kinds, 3000)
    write_hour(p, kinds, tmp_path / "kafka", "bench", rows_per_file=700)
    write_hour(p, kinds, tmp_path / "spread", "bench", rows_per_file=700, spread=True)
    key = lambda r: (r.partition, r.offset, r.value)  # noqa: E731
    spread = _records(tmp_path / "spread")
    assert sorted(map(key, spread)) == sorted(map(key, _records(tmp_path / "kafka")))
    files = sorted((tmp_path / "spread").rglob("*.parquet"))
    offsets = [pq.read_table(f, columns=["offset"]).column("offset").to_pylist() for f in files]
    assert len(files) > 1 and all(o != sorted(o) for o in offsets)
    assert min(offsets[0]) < max(offsets[1]) and min(offsets[1]) < max(offsets[0])
    ctx = DecodeContext(tables={"shop.orders": parse_create_table(CREATE_SQL)[2]})
    events = [r for r in decode_records(spread, "debezium_json", ctx).to_pylist() if r["kind"] == "event"]  # fmt: skip
    assert len(table_rows(fold(events))["shop.orders"]) == p.expected_rows()
