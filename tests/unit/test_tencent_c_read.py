"""The Tencent lane's read in C (`recon/decode/formats/_tencent_lane.c`) answers as the decoder
does, or leaves the message to it: on the demo's and the benchmark's messages
(which it reads itself), on transactions of every kind of value, header and entry
(hypothesis), and on those messages damaged byte by byte (it must neither crash nor accept what
Python's protobuf would refuse)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recon._proto import tencent_subscribe_pb2 as pb
from recon.config import TableConfig
from recon.core.model import RawRecord
from recon.decode.base import DecodeContext, Sink
from recon.decode.formats import tencent_dts_pb as tdts
from recon.decode.lane import LaneRows
from recon.decode.stats import Stat
from recon.demo import sample
from tests.support.examples import examples
from tests.support.lane_reference import fed_alone, lane_image, lane_row

_TXNS = sample.workload(datetime(2026, 11, 20, tzinfo=UTC), 1, txns_per_hour=6, seed=5)
_DEMO = [v for _, _, _, v in sample.encode_tencent(_TXNS, segment_bytes=10**6).records]
_CTX = DecodeContext(
    tables={"shop.orders": TableConfig("shop.orders", ddl=sample.CREATE_SQL).table_def()},
    primary_keys={"s.nokey": ["id"]},
)  # type: ignore[dict-item]


def _lane(last_seq: int = 0) -> tdts.TencentLane:
    dec = tdts.TencentDtsPbDecoder(_CTX, Sink())
    dec.last_seq = last_seq
    return tdts.TencentLane(dec, LaneRows())


def _decoded(value: Any, last_seq: int = 0, offset: int = 7) -> Any:
    """The decoder's answer to one record, in the lane's form: the reference C is held to.
    (the last seqId, the row changes (op, row, before, after)) when the decoder applies one
    whole transaction of row changes and nothing else; None for any other record (the lane
    leaves it to the decoder); "error" when the decoder quarantines it."""
    sink = Sink()
    dec = tdts.TencentDtsPbDecoder(_CTX, sink)
    dec.last_seq = last_seq
    if not fed_alone(dec, RawRecord("t", 1, offset, None, value, 0)):
        return "error"
    counted = {stat: n for (_, _, stat), n in sink.stats.items() if n}
    if counted != {Stat.TRANSACTIONS_COMMITTED: 1} or sink.held or dec.segments:
        return None
    if any(ev.op not in ("insert", "update", "delete") for ev in sink.events):
        return None
    return dec.last_seq, [
        (ev.op, lane_row(ev), lane_image(ev.before), lane_image(ev.after)) for ev in sink.events
    ]


def _both(value: Any, last_seq: int = 0, offset: int = 7) -> tuple[Any, Any]:
    """(C's answer, the decoder's) to one record: a result, None, or "error"."""
    lane = _lane(last_seq)
    assert tdts._native is not None
    try:
        c = tdts._native.read(value, last_seq, lane.native_spec, "t", 1, offset)
    except Exception:  # noqa: BLE001 - C may refuse by raising
        c = "error"
    ref = _decoded(value, last_seq, offset)
    return c, ref


def _agrees(value: Any, last_seq: int = 0) -> Any:
    """C's answer, checked: the decoder's, or None (left to the decoder)."""
    c, ref = _both(value, last_seq)
    assert c is None or c == "error" and ref in (None, "error") or c == ref, (c, ref)
    return c


def test_the_c_read_is_built() -> None:
    """`make setup` builds it; a checkout without it decodes Tencent ~3x slower."""
    assert tdts._native is not None


def test_the_c_read_reads_the_demos_and_the_benchmarks_messages(tmp_path: Path) -> None:
    """Whole transactions of the demo's workload and of the benchmark's generator (inserts,
    updates, deletes; text, numbers, decimals, DATETIME, binary) are read by C, as Python
    reads them; each row shares its column list's key and types objects, as in Python."""
    from benchmarks.formats import KINDS
    from benchmarks.gen import plan, write_hour

    p = plan(datetime(2026, 3, 2, 10, tzinfo=UTC), 300, 50, 0.2, 1, 3)
    write_hour(p, KINDS["tencent_dts_pb"](), tmp_path, "bench")
    bench = [v for f in sorted(tmp_path.rglob("*.parquet")) for v in pq.read_table(f)["value"]]
    whole = [v for v in _DEMO if _both(v)[1] is not None]
    assert len(whole) >= 4 and len(bench) >= 250
    for value in [*whole, *(v.as_py() for v in bench)]:
        got = _agrees(value)
        assert got not in (None, "error")
        rows = [row for _, row, _, _ in got[1]]
        assert len({(id(r[2]), id(r[3])) for r in rows}) == 1


_CHARSETS = ["", "utf8", "UTF8MB4", "utf8mb3", "ascii", "binary", "latin1", "utf-8", "gbk"]
_TYPES = [
    "int(11)", "bigint unsigned", "varchar(20)", "datetime", "datetime(3)", "timestamp", "json",
    "blob", "enum('a','b')", "set('x')", "decimal(10,2)", "float", "", "geometry",
]  # fmt: skip
_TEXTS = st.sampled_from(
    ["", "1", "-5", "2026-03-02 10:00:00", "2026-03-02T10:00:00", "2026-03-02 10:00:00.5", "é", "x\n"]
) | st.text(max_size=4)  # fmt: skip
_BYTES = st.sampled_from([
    b"", b"ab", b"\xff\xfe", "é".encode(), b"\xed\xa0\x80", b"2026-03-02 10:00:00",
    b"2026-03-02T10:00:00", b"2026-03-02 10:00:00.120", "2026-03-02 10:00:0é".encode(),
])  # fmt: skip
_DATA = st.builds(
    pb.Data,
    dataType=st.sampled_from([*range(15), 15, 99]),
    charset=st.sampled_from(_CHARSETS),
    sv=_TEXTS,
    bv=_BYTES | st.binary(max_size=4),
)


_TAME_DATA = st.builds(
    pb.Data,
    dataType=st.sampled_from([0, 3, 4, 8, 10, 11, 12, 13, 13, 13]),
    charset=st.sampled_from(["", "utf8", "UTF8MB4", "ascii", "binary"]),
    sv=_TEXTS,
    bv=_BYTES,
)


@st.composite
def _dml(draw: st.DrawFn, tame: bool = False) -> pb.Event:
    n = draw(st.integers(1, 3))
    names = draw(st.lists(st.sampled_from(["id", "v", "w", "é"]), min_size=n, max_size=n))
    if tame:
        names = ["id", "v", "w"][:n]
    types = (
        st.sampled_from(["datetime", "datetime(6)", *_TYPES]) if tame else st.sampled_from(_TYPES)
    )
    cols = [
        pb.Column(name=c, originalType=draw(types), isKey=i == 0 and draw(st.booleans()))
        for i, c in enumerate(names)
    ]  # fmt: skip
    if tame:
        datas = st.lists(_TAME_DATA, min_size=n, max_size=n)
    else:
        datas = st.lists(_DATA, min_size=max(0, n - 1), max_size=n + 1)
    rows = draw(st.lists(st.builds(pb.RowChange, oldColumns=datas, newColumns=datas), max_size=2))
    op = draw(st.sampled_from([0, 1, 2] if tame else [0, 0, 1, 1, 2, 3]))
    return pb.Event(dmlEvent=pb.DMLEvent(dmlEventType=op, columns=cols, rows=rows))


@st.composite
def _entry(draw: st.DrawFn, kind: str, seq: int | None = None) -> pb.Entry:
    """An entry of `kind`; `seq`: numbered so, with fewer odd headers (one in ten)."""
    odd = seq is None or draw(st.integers(0, 9)) == 0
    odd_files = ["b.12\n", "b.٣", "b." + "9" * 21] if odd else []
    odd_positions = [2**63] if odd else []
    header = pb.Header(
        messageType=draw(st.sampled_from([0, 1, 2, 2, 5])),
        seqId=draw(st.sampled_from([0, 1, 2, 3, 5, 2**64 - 1])) if seq is None else seq,
        fileName=draw(st.sampled_from(["mysql-bin.000003", "", "b", *odd_files])),
        position=draw(st.sampled_from([0, 4, 2**63 - 1, *odd_positions])),
        gtid=draw(st.sampled_from(["", "u:9"])),
        schemaName=draw(st.sampled_from(["s", "shop", ""])),
        tableName=draw(st.sampled_from(["t", "nokey", "orders"])),
        timestamp=draw(st.sampled_from([0, 1_772_445_600, 2**32 - 1])),
    )  # fmt: skip
    txn = draw(st.sampled_from(["", "x1"]))
    event = {
        "begin": pb.Event(beginEvent=pb.BeginEvent(transactionId=txn)),
        "commit": pb.Event(commitEvent=pb.CommitEvent(transactionId=txn)),
        "bare": pb.Event(),
        "dml": draw(_dml()),
        "tame": draw(_dml(tame=True)),
        "ddl": pb.Event(ddlEvent=pb.DDLEvent(sql="ALTER TABLE s.t ADD COLUMN w int")),
        "two": pb.Event(beginEvent=pb.BeginEvent(), dmlEvent=pb.DMLEvent()),
    }[kind]
    return pb.Entry(header=header, event=event)


@st.composite
def _message(draw: st.DrawFn) -> bytes:
    kinds = draw(
        st.just(["begin", "dml", "commit"])
        | st.lists(st.sampled_from(["begin", "commit", "bare", "dml", "dml", "ddl", "two"]), max_size=5)
    )  # fmt: skip
    data = pb.Entries(items=[draw(_entry(k)) for k in kinds]).SerializeToString()
    env = pb.Envelope(
        version=draw(st.sampled_from([1, 1, 1, 2])),
        total=draw(st.sampled_from([0, 1, 1, 2])),
        index=draw(st.sampled_from([0, 0, 0, 1])),
        data=data,
    )
    return env.SerializeToString()


@st.composite
def _transaction(draw: st.DrawFn) -> bytes:
    """BEGIN, one to three DML entries, COMMIT, numbered on from 1: what the lane reads, but
    for its values (every data type the lane converts, text that is not UTF-8, DATETIME text
    in other forms) and its headers."""
    kinds = ["begin", *["tame"] * draw(st.integers(1, 3)), "commit"]
    items = [draw(_entry(k, seq=i + 2)) for i, k in enumerate(kinds)]
    data = pb.Entries(items=items).SerializeToString()
    return pb.Envelope(version=1, total=1, data=data).SerializeToString()


@settings(max_examples=examples(800), deadline=None)
@given(value=_message() | _transaction(), last_seq=st.sampled_from([0, 0, 1, 2, 2**64 - 1]))
def test_the_c_read_answers_as_python_or_leaves_it(value: bytes, last_seq: int) -> None:
    """Any transaction (every data type, charset and column type; headers with odd file
    names, positions past 64 signed bits, seqIds with gaps; entries of every kind, bare or
    with two bodies; other envelope versions and segments): C's answer is Python's, or None."""
    _agrees(value, last_seq)


@settings(max_examples=examples(6000), deadline=None)
@given(
    value=st.sampled_from(_DEMO),
    at=st.integers(0, 10**6),
    how=st.sampled_from(["flip", "cut", "insert", "set"]),
    byte=st.integers(0, 255),
)
def test_the_c_read_of_damaged_messages_answers_as_python_or_leaves_it(
    value: bytes, at: int, how: str, byte: int
) -> None:
    """A message with a byte changed, cut short or added anywhere: C never crashes, and never
    reads what Python refuses (a varint or length out of bounds, a string that is not UTF-8, a
    charset name with a NUL in it)."""
    i = at % (len(value) + 1)
    damaged = {
        "flip": value[:i] + bytes([value[i] ^ (1 << byte % 8)]) + value[i + 1 :] if i < len(value) else value,
        "cut": value[:i],
        "insert": value[:i] + bytes([byte]) + value[i:],
        "set": value[:i] + bytes([byte]) + value[i + 1 :],
    }[how]  # fmt: skip
    _agrees(damaged)


@settings(max_examples=examples(300), deadline=None)
@given(value=_transaction(), at=st.integers(0, 10**6), byte=st.integers(0, 255))
def test_the_c_read_of_damaged_transactions_answers_as_python_or_leaves_it(
    value: bytes, at: int, byte: int
) -> None:
    """The same for the transactions of every kind of value built above, a byte set anywhere."""
    i = at % (len(value) + 1)
    _agrees(value[:i] + bytes([byte]) + value[i + 1 :])


def test_a_charset_with_a_nul_is_left_to_python() -> None:
    """`utf8\\0b4` is no codec to Python (an error); C once compared names up to the NUL."""
    good = _with(_entries_marked("none"))
    bad = good.replace(b"utf8mb4", b"utf8\x00b4")
    assert bad != good
    assert _both(good)[0] not in (None, "error") and _both(bad) == (None, "error")


@pytest.mark.parametrize("value", [None, b"", b"\x08\x01", 12])
def test_the_c_read_leaves_what_is_not_a_message(value: Any) -> None:
    assert _both(value)[0] in (None, "error")


def _with(entries: list[pb.Entry]) -> bytes:
    data = pb.Entries(items=entries).SerializeToString()
    return pb.Envelope(version=1, total=1, data=data).SerializeToString()


_MARK = "§§"
"""A string field's text in a message built here; its bytes (c2 a7 c2 a7) are then replaced by
as many that are not UTF-8 (c2 c2 a7 a7), which Python's protobuf refuses to parse."""


def _entries_marked(where: str) -> list[pb.Entry]:
    """A transaction the lane reads, with `_MARK` in one string field that no value or key of
    its output comes from (`where`)."""
    h = {"schemaName": "s", "tableName": "t", "fileName": "b.000001"}
    mark = {where: _MARK}
    begin = pb.Entry(
        header=pb.Header(seqId=1, gtid=mark.get("begin.gtid", "u:9"), **h),
        event=pb.Event(beginEvent=pb.BeginEvent(transactionId="x1")),
    )
    old = pb.Data(dataType=pb.STRING, charset="utf8mb4", bv=b"a", sv=mark.get("old.sv", ""))
    new = pb.Data(dataType=pb.STRING, charset="utf8mb4", bv=b"b", sv=mark.get("new.sv", ""))
    dml = pb.DMLEvent(
        dmlEventType=pb.INSERT,
        columns=[pb.Column(name="v", originalType="varchar(9)", isKey=True)],
        rows=[pb.RowChange(oldColumns=[old], newColumns=[new])],
    )
    entry = pb.Entry(header=pb.Header(seqId=2, gtid="u:9", **h), event=pb.Event(dmlEvent=dml))
    commit = pb.Entry(
        header=pb.Header(seqId=3, **h),
        event=pb.Event(commitEvent=pb.CommitEvent(transactionId=mark.get("commit.txn", "x1"))),
    )
    return [begin, entry, commit]


@pytest.mark.parametrize("where", ["begin.gtid", "old.sv", "new.sv", "commit.txn"])
@pytest.mark.parametrize(
    "not_utf8",
    [b"\xc2\xc2\xa7\xa7", b"\xed\xa0\x80A", b"\xe0\x80\x80A", b"\xf4\x90\x80\x80", b"A\xffAA"],
    ids=["continuation", "surrogate", "overlong", "beyond-10ffff", "ff"],
)
def test_the_c_read_refuses_text_that_is_not_utf8_where_it_reads_no_value(
    where: str, not_utf8: bytes
) -> None:
    """Python's protobuf refuses a message with a string field that is not UTF-8, read or
    not; so does C (a BEGIN's GTID beside its transaction id, an insert's old values, a value
    sent both as text and as bytes, a COMMIT's transaction id beside BEGIN's), whichever way
    the bytes are not UTF-8."""
    good = _with(_entries_marked(where))
    assert _agrees(good) not in (None, "error")  # read by C, but for the mark
    bad = good.replace(_MARK.encode(), not_utf8)
    assert bad != good
    c, py = _both(bad)
    assert py == "error" and c is None
