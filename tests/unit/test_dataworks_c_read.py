"""The DataWorks lane's read in C (`recon/decode/formats/_dataworks_lane.c`) answers as the
decoder does, or leaves the message to it: on the demo's, the benchmark's and
the vendor document's messages (which it reads itself), on messages of every kind of column,
value and payload member, written with whitespace, escapes, duplicates and extra members
(hypothesis), and on those messages damaged byte by byte (it must neither crash nor accept
what msgspec and orjson would read otherwise or refuse)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from recon.core.model import RawRecord
from recon.decode.base import DecodeContext, Sink
from recon.decode.formats import dataworks_json as dw
from recon.decode.lane import LaneRows
from recon.decode.stats import Stat
from recon.demo import sample
from tests.support.examples import examples
from tests.support.json_text import (
    Obj,
    Raw,
    agreeing,
    attempt,
    damaged,
    hostile_layout,
    hostile_members,
    json_text,
    rare,
)
from tests.support.lane_reference import fed_alone, lane_image, lane_row

_VECTORS = Path(__file__).parents[1] / "data/cdc-vectors/dataworks-json"
"""Real messages (Apache Paimon's test resources): an INSERT, a DELETE, and an UPDATE_AFTER
holding both images; one a line, after a license comment."""


def _lane() -> dw.DataworksLane:
    return dw.DataworksLane(dw.DataworksJsonDecoder(DecodeContext(), Sink()), LaneRows())


def _both(value: bytes, learnt: bytes | None = None) -> tuple[Any, Any]:
    """(C's answer, the decoder's) to one record: a result, None (C: left to the decoder) or
    "error". C reads a message whose schema text opens it as a message read before did
    (`learnt`, else `value` itself): that one is read first, as the stream would have."""
    rec = RawRecord("t", 1, 7, None, value, 0)
    dw._PARSE(learnt if learnt is not None else value)
    known = dw._PARSE.known_opening(value)
    c: Any = None
    if known is not None:
        lane = _lane()
        table = attempt(lambda: lane.table_of(known[0] or dw._NO_SCHEMA))
        assert dw._native is not None
        if table == "error":
            c = "error"
        elif table.native is not None:
            c = attempt(lambda: dw._native.read(value, known[1], table.native, "t", 1, 7))
            assert c != "error", "the C read raised"
    ref = _decoded(rec)
    return c, ref


_RAW_OP = {"insert": "INSERT", "delete": "DELETE", "update": "UPDATE_AFTER"}
_LANE_STATS = {Stat.UPDATE_AFTER_UNPAIRED}
"""What the decoder may count of a record the lane reads (an UPDATE_AFTER alone)."""


def _decoded(rec: RawRecord) -> Any:
    """The decoder's answer to one record in the lane's form, the reference C is held to: (op,
    row, pair key, before, after) of a row change of a table with a key, of declared columns
    and a numeric sequenceId (`DataworksLane`'s docstring), an UPDATE_BEFOR as the decoder
    holds it; None for any other record; "error" when the decoder quarantines it."""
    sink = Sink()
    dec = dw.DataworksJsonDecoder(DecodeContext(), sink)
    if not fed_alone(dec, rec):
        return "error"
    if {stat for (_, _, stat), n in sink.stats.items() if n} - _LANE_STATS:
        return None
    if len(sink.events) == 1 and not dec.pending and sink.events[0].op in _RAW_OP:
        ev = sink.events[0]
        op = _RAW_OP[ev.op]
    elif not sink.events and len(dec.pending) == 1:
        (_, ev), op = next(iter(dec.pending.values())), "UPDATE_BEFOR"
    else:
        return None
    schema = dw._PARSE(rec.value).get("schema") or dw._NO_SCHEMA
    if not ev.pk or ev.types is not dw._SCHEMA_COLUMNS(schema)[0]:
        return None  # keyless, or a column the schema does not declare: not the lane's
    pair = f"{ev.db}.{ev.tbl}:{ev.seq}" if op in ("UPDATE_BEFOR", "UPDATE_AFTER") else ""
    return op, lane_row(ev), pair, lane_image(ev.before), lane_image(ev.after)


def _agrees(value: bytes, learnt: bytes | None = None) -> Any:
    return agreeing(value, *_both(value, learnt))


def test_the_c_read_is_built() -> None:
    """`make setup` builds it; a checkout without it decodes DataWorks in Python only."""
    assert dw._native is not None


def test_the_c_read_reads_the_demos_and_the_benchmarks_messages(tmp_path: Path) -> None:
    """The demo's row changes and the benchmark generator's (INSERT, UPDATE_BEFOR and
    UPDATE_AFTER, DELETE; DATE as epoch milliseconds) are read by C, as Python reads them;
    every row shares its table's types object, as in Python. Its heartbeats are left to
    Python (which gives them to the decoder)."""
    from benchmarks.formats import KINDS
    from benchmarks.gen import plan, write_hour

    txns = sample.workload(datetime(2026, 11, 20, tzinfo=UTC), 1, txns_per_hour=6, seed=5)
    demo = [v for *_, v in sample.encode_dataworks(txns).records if v]
    p = plan(datetime(2026, 3, 2, 10, tzinfo=UTC), 300, 50, 0.2, 1, 3)
    write_hour(p, KINDS["dataworks_json"](), tmp_path, "bench")
    bench = [v.as_py() for f in sorted(tmp_path.rglob("*.parquet")) for v in pq.read_table(f)["value"]]  # fmt: skip
    beats = [v for v in demo if b"MHEARTBEAT" in v]
    values = [v for v in demo if v not in beats] + [v for v in bench if v]
    assert len(beats) >= 1 and len(values) >= 250
    types = set()
    for value in values:
        got = _agrees(value)
        assert got not in (None, "error"), value[:300]
        types.add(id(got[1][3]))
    assert len(types) <= 2  # the demo's and the benchmark's table
    for value in beats:
        assert _both(value) == (None, None)


_SCHEMA = orjson.dumps({
    "dataColumn": [{"name": "id", "type": "LONG"}, {"name": "name", "type": "STRING"},
                   {"name": "at", "type": "DATE"}, {"name": "b", "type": "BYTES"}],
    "primaryKey": ["id"], "source": {"dbType": "MySQL", "dbName": "shop", "tableName": "orders"},
}).decode()  # fmt: skip
_OK = '"id":1,"name":"x","at":1700000000123,"b":"AQI="'
_EDGE_IMAGES = [  # (the after image's columns, whether C reads the message itself)
    (_OK, True), ('"b":"AQI=","at":1,"id":7', True), ('"id":-0,"at":-0', True), ("", True),
    ('"id":null,"name":null,"at":null,"b":null', True), ('"id":"7","at":"2026-03-02"', True),
    ('"id":100000000000000000000000000000', True), ('"at":-62135596800000', True),
    ('"at":253402300799999', True), ('"at":-1', True), ('"at":86399999', True),
    ('"name":"\\u00e9\\n\\ud83d\\ude00\\/\\""', True), ('"name":"a\x7fb é"', True),
    (' "id" : 1 ,\n"name"\t: "x" ', True),
    ('"at":18446744073709551621', False), ('"at":-62135596800001', False), ('"at":253402300800000', False), ('"at":10000000000000000000', False),
    ('"id":true', False), ('"name":false', False), ('"id":1.5', False), ('"id":10.0e0', False),
    ('"id":' + "1" * 4400, False), ('"id":[1]', False), ('"id":{}', False),
    ('"name":"\\udc00"', False), ('"name":"\\ud800"', False), ('"name":"\\ud800\\u0041"', False),
    ('"name":"a\x01b"', False), ('"name":"\udcff"', False), ('"name":"\udced\udca0\udc80"', False),
    ('"id":1,"id":2', False), ('"zz":2', False), ('"i\\u0064":1', False), ('"id":01', False),
    ('"id":-', False), ('"id":1.', False), ('"id":+1', False), ('"id":1e', False),
    ('"id":1,', False), ('"id":nul', False),
]  # fmt: skip
_EDGE_PAYLOADS = [  # (the payload's members after the after image, whether C reads it itself)
    (',"op":"INSERT","sequenceId":"12"', True), (',"op":"INSERT","sequenceId":12', False),
    (',"op":"UPDATE_AFTER","sequenceId":"12","before":{"dataColumn":{"id":1}}', True),
    (',"op":"UPDATE_BEFOR","sequenceId":"12","before":{"dataColumn":{"id":1},"x":[1]}', True),
    (',"op":"DELETE","sequenceId":"12","before":{"x":1,"dataColumn":{"id":1}}', True),
    (',"op":"INSERT","sequenceId":"12","timestamp":{"eventTime":5,"x":{"a":[]}}', True),
    (',"op":"INSERT","sequenceId":"12","timestamp":{"eventTime":5,"eventTime":"6"}', True),
    (',"op":"INSERT","sequenceId":"12","timestamp":"5"', True),
    (',"op":"INSERT","sequenceId":"12","timestamp":{"eventTime":true}', True),
    (',"op":"INSERT","sequenceId":"12","timestamp":[{"eventTime":5}]', True),
    (',"op":"INSERT","sequenceId":"12","timestamp":{"eventTime":2e3}', False),
    (',"op":"INSERT","sequenceId":"12","timestamp":{"eventTime":{}}', False),
    (',"op":"INSERT","sequenceId":"12","timestamp":{"eventTime":9223372036854775808}', False),
    (',"op":"INSERT","sequenceId":"-3"', False), (',"op":"INSERT","sequenceId":null', False),
    (',"op":"INSERT","sequenceId":"0012"', True), (',"op":"INSERT","sequenceId":"' + "9" * 38 + '"', True),
    (',"op":"INSERT","sequenceId":"' + "9" * 39 + '"', False), (',"op":"INSERT","sequenceId":"1 "', False),
    (',"op":"INSERT","sequenceId":"٣"', False), (',"op":"INSERT","sequenceId":true', False),
    (',"op":"INSERT","sequenceId":"12","sequenceId":"13"', True), (',"op":"INSERT"', False),
    (',"op":"DELETE","op":"INSERT","sequenceId":"12","ddl":null,"x":{"y":[1,"\\t"]}', True),
    (',"op":"INSERT","sequenceId":1.5', False), (',"op":"INSERT","sequenceId":["1"]', False),
    (',"op":"MHEARTBEAT","sequenceId":"12"', False), (',"op":"insert","sequenceId":"12"', False),
    (',"op":"INS\\u0045RT","sequenceId":"12"', False), (',"op":5,"sequenceId":"12"', False),
    (',"sequenceId":"12"', False), (',"op":"INSERT","sequenceId":"12","before":{"x":1}', False),
    (',"op":"DELETE","sequenceId":"12","before":{"dataColumn":[]}', False),
    (',"op":"DELETE","sequenceId":"12","before":5', False),
    (',"op":"INSERT","sequenceId":"12","before":{"dataColumn":5}', False),
    (',"op":"INSERT","sequenceId":"12","x":"\\q"', False), (',"op":"INSERT","sequenceId":"12","x":1.5', False),
    (',"op":"INSERT","sequenceId":"12","x":"\udcf4\udc90\udc80\udc80"', False),
]  # fmt: skip


def _edge(after: str, tail: str = ',"op":"INSERT","sequenceId":"12"', end: str = "") -> bytes:
    payload = f'{{"after":{{"dataColumn":{{{after}}}}}{tail}}}'
    text = f'{{"schema":{_SCHEMA},"payload":{payload},"version":"0.0.1"{end}}}'
    return text.encode(errors="surrogateescape")


def test_the_c_read_on_the_edges_of_json() -> None:
    """Numbers, strings, escapes, UTF-8, DATE bounds, duplicates and members one at a time: C
    reads what it reads as Python does (-0, big integers, escapes, whitespace, members in any
    order or twice) and leaves the rest (fractions, booleans, lone surrogates, control
    characters, invalid UTF-8 or JSON, a column the schema lacks or one twice) to Python."""
    learnt = _edge(_OK)
    for after, c_reads in _EDGE_IMAGES:
        c = _agrees(_edge(after), learnt)
        assert (c not in (None, "error")) == c_reads, after
    for tail, c_reads in _EDGE_PAYLOADS:
        c = _agrees(_edge(_OK, tail), learnt)
        assert (c not in (None, "error")) == c_reads, tail
    second = ',"payload":{"op":"DELETE","sequenceId":"14","before":{"dataColumn":{"id":2}}}'
    for end, c_reads in [(',"x":{"a":[true,null]}', True), (',"payload":null', False), (second, True),
                         (',"schema":null', False), (",", False), (',"x":1.5', False)]:  # fmt: skip
        c = _agrees(_edge(_OK, end=end), learnt)
        assert (c not in (None, "error")) == c_reads, end
    for end, c_reads in [(" \n\t\r", True), ("x", False), ("}", False), (" ,", False)]:
        c = _agrees(_edge(_OK) + end.encode(), learnt)
        assert (c not in (None, "error")) == c_reads, end


def test_real_messages_are_read_by_c_when_their_schema_opens_them() -> None:
    """Paimon's DataWorks messages (their DOUBLE values are strings): compact with the schema
    first, as its DELETE and UPDATE are written, C reads them as Python does; its INSERT opens
    with the payload (Python reads it alone) and has a sequenceId of -1, which the lane
    leaves to the decoder. Pretty-printed, Python reads each alone."""
    lines = [
        line.strip().encode()
        for f in sorted(_VECTORS.glob("*.txt"))
        for line in f.read_text().splitlines()
        if line.strip().startswith("{")
    ]
    assert len(lines) == 3
    read = []
    for value in lines:
        msg = orjson.loads(value)
        compact = orjson.dumps({"schema": msg.pop("schema"), **msg})
        c, py = _both(compact)
        assert c == py, compact
        read += [py[0]] if py is not None else []
        assert _agrees(value) == (py if value.startswith(b'{"schema":') else None)
        pretty = orjson.dumps(orjson.loads(compact), option=orjson.OPT_INDENT_2)
        assert _agrees(pretty) is None and _both(pretty)[1] == py
    assert sorted(read) == ["DELETE", "UPDATE_AFTER"]


_TYPES = ["LONG", "STRING", "DATE", "BYTES", "DOUBLE", "BOOLEAN", "GEOMETRY", None]
_NAMES = ["id", "name", "at", "é", "x y", 'a"b', "n\\m"]
"""Column names; the last two are written with escapes (which C leaves to Python)."""
_VALUES = st.one_of(
    st.text(max_size=5),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 2**63, -(2**63) - 1, 10**30, -62135596800000, 253402300799999]),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([
        Raw("-0"), Raw('"\\u00e9\\n"'), Raw('"\\ud83d\\ude00"'), Raw('"\\ud800"'), Raw("[1,2]"),
        Raw('"\\udc00x"'), Raw("1E2"), Raw('"a\\/b\\"c"'), Raw('"x\\u0000y"'), Raw("{}"),
        Raw("01"), Raw('"\\x"'), Raw("tru"), Raw("1" * 4400), Raw('{"a":[1,{"b":null}]}'),
    ]),
)  # fmt: skip
_TAME_VALUES = st.one_of(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), st.none())
_SEQ = st.sampled_from(["12", "12", 12, "-3", "0012", "1e3", "", None, True, 1.5, Raw("-0")])
_OPS = ["INSERT", "DELETE", "UPDATE_BEFOR", "UPDATE_AFTER"]


@st.composite
def _image(draw: st.DrawFn, cols: list[str], tame: bool) -> Any:
    pairs: list[tuple[Any, Any]] = [
        (c, draw(_TAME_VALUES if tame or not rare(draw) else _VALUES)) for c in cols
    ]
    if not tame:
        pairs = hostile_members(draw, pairs, _VALUES)
    image: list[tuple[Any, Any]] = [("dataColumn", Obj(*pairs))]
    if not tame and rare(draw):
        image.insert(draw(st.integers(0, 1)), draw(st.sampled_from([
            ("x", Raw('[1,{"b":"\\t"}]')), ("dataColumn", Obj()), ("dataColumn", None),
        ])))  # fmt: skip
    if not tame and rare(draw) and rare(draw):
        return draw(st.sampled_from([None, "x", 5, Raw("[]"), Obj()]))
    return Obj(*image)


@st.composite
def _message(draw: st.DrawFn, tame: bool = False) -> tuple[bytes, bytes]:
    """A DataWorks message: a schema of 1-4 columns of any type (a key column maybe), a
    payload of an op, a sequenceId, a timestamp and images; untamed, each of many variations
    now and then (whitespace, members in any order, twice or left out, other values, things
    after the payload, ...)."""
    names = _NAMES[:5] if tame or not rare(draw) else _NAMES
    cols = draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True))
    types = [draw(st.sampled_from(_TYPES[:4] if tame else _TYPES)) for _ in cols]
    schema = {
        "dataColumn": [{"name": c, "type": t} for c, t in zip(cols, types, strict=True)],
        "primaryKey": [cols[0]] if tame or not rare(draw) else draw(st.sampled_from([[], None])),
        "source": {"dbType": "MySQL", "dbName": "shop", "tableName": "orders"},
    }
    op = draw(st.sampled_from(_OPS))
    before = draw(_image(cols, tame)) if op in ("DELETE", "UPDATE_BEFOR") else None
    after = draw(_image(cols, tame)) if op in ("INSERT", "UPDATE_AFTER") else None
    if op == "UPDATE_AFTER" and draw(st.booleans()):
        before = draw(_image(cols, tame))
    ts = Obj(("eventTime", draw(st.integers(0, 2**41))), ("systemTime", 1))
    pairs: list[tuple[Any, Any]] = [
        ("before", before), ("after", after), ("sequenceId", str(draw(st.integers(0, 2**64)))),
        ("op", op), ("timestamp", ts), ("ddl", None),
    ]  # fmt: skip
    sp = end = ""
    if not tame:
        if rare(draw):
            pairs[2] = ("sequenceId", draw(_SEQ))
        if rare(draw):
            pairs[3] = (
                "op",
                draw(st.sampled_from(["MHEARTBEAT", "CREATE", "x", None, 5, "insert"])),
            )
        if rare(draw):
            pairs[4] = ("timestamp", draw(st.sampled_from([
                None, 5, Obj(), Obj(("eventTime", "5")), Obj(("eventTime", 2**64)),
                Obj(("eventTime", Raw("1.5"))), Obj(("eventTime", 1), ("eventTime", 2)),
            ])))  # fmt: skip
        pairs, sp, end = hostile_layout(draw, pairs)
    opening = f'{{"schema":{orjson.dumps(schema).decode()},'
    text = f'{opening}{sp}"payload"{sp}:{sp}{json_text(Obj(*pairs), sp)},"version":"0.0.1"{end}'
    # and a message of the same schema a stream read before (C reads what follows it)
    return (text + "}" * (end != "}")).encode(), f'{opening}"payload":null}}'.encode()


@settings(max_examples=examples(600), deadline=None)
@given(_message())
def test_the_c_read_answers_as_python_or_leaves_it(message: tuple[bytes, bytes]) -> None:
    _agrees(*message)


@settings(max_examples=examples(150), deadline=None)
@given(_message(tame=True))
def test_the_c_read_reads_plain_messages_itself(message: tuple[bytes, bytes]) -> None:
    """Compact messages of strings, 64-bit integers and NULLs: C reads each that the lane
    takes (else the tests above could pass with C leaving everything to Python); a DATE's
    milliseconds beyond the years 1-9999, which Python refuses, it refuses too."""
    c, py = _both(*message)
    assert c == py if py not in (None, "error") else c in (None, "error"), (message, c, py)


_DEMO = [v for *_, v in sample.encode_dataworks(
    sample.workload(datetime(2026, 11, 20, tzinfo=UTC), 1, txns_per_hour=4, seed=3)
).records if v and b"MHEARTBEAT" not in v]  # fmt: skip


@settings(max_examples=examples(1500), deadline=None)
@given(st.data())
def test_damaged_messages_are_refused_or_read_as_python_reads_them(data: st.DataObject) -> None:
    """A demo message with a byte changed, cut out or added after its schema (C reads only
    what follows the schema text it knows)."""
    original = data.draw(st.sampled_from(_DEMO))
    opening = original.index(b',"payload"') + 1
    _agrees(damaged(data, original, opening, b"T"), learnt=original)


def test_the_c_read_builds_the_order_key_of_any_record_place_or_leaves_it() -> None:
    """The order key's partition and offset: up to 32 and 63 bits C writes them as Python
    does; a place beyond (which Python clamps) it leaves to Python."""
    value = _edge(_OK, ',"op":"UPDATE_BEFOR","sequenceId":"12","before":{"dataColumn":{"id":1}}')
    dw._PARSE(value)
    known = dw._PARSE.known_opening(value)
    assert known is not None
    table = _lane().table_of(known[0])
    for partition, offset, c_reads in [
        (0, 0, True), (2**32 - 1, 2**63 - 1, True), (2**32, 5, False), (3, -1, False),
        (-1, 5, False), (3, 2**63, False),
    ]:  # fmt: skip
        c = dw._native.read(value, known[1], table.native, "topic", partition, offset)
        py = _decoded(RawRecord("topic", partition, offset, None, value, 0))
        assert (c is not None) == c_reads and (c is None or c == py), (partition, offset, c, py)
        if c is not None:
            assert c[1][4][16:] == b"\x00" + partition.to_bytes(4, "big") + offset.to_bytes(
                8, "big"
            )
