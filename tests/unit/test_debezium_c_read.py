"""The Debezium lane's read in C (`recon/decode/formats/_debezium_lane.c`) answers as the
decoder does, or leaves the message to it: on the demo's, the benchmark's and a real
connector's messages (which it reads itself), on envelopes of every kind of schema field,
value, source and payload member, written with whitespace, escapes, duplicates and extra
members (hypothesis), and on those messages damaged byte by byte (it must neither crash nor
accept what msgspec and orjson would read otherwise or refuse)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from recon.core.model import RawRecord
from recon.decode.base import DecodeContext, Sink
from recon.decode.formats import debezium_json as dbz
from recon.decode.lane import LaneRows
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

_KEY = b'{"id":1}'
_VECTOR = (
    Path(__file__).parents[1] / "data/cdc-vectors/debezium-json/debezium__serde-with-schema.json"
)
"""A real connector's message (Debezium's own test resource), pretty-printed: as a connector
writes it (compact) it is read by C; as it is here, by Python only."""


def _lane(keys: dict[str, list[str]] | None = None) -> dbz.DebeziumLane:
    ctx = DecodeContext(primary_keys=keys or {})
    return dbz.DebeziumLane(dbz.DebeziumJsonDecoder(ctx, Sink()), LaneRows())


def _both(
    value: bytes,
    learnt: bytes | None = None,
    key: bytes | None = _KEY,
    keys: dict[str, list[str]] | None = None,
    place: tuple[int, int] = (1, 7),
) -> tuple[Any, Any]:
    """(C's answer, the decoder's) to one record (of record key `key`, at partition and offset
    `place`, the pipeline's configured `keys`): a result, None (C: left to the decoder) or
    "error". C reads a message whose schema text opens it as a message read before did
    (`learnt`, else `value` itself): that one is read first, as the stream would have."""
    rec = RawRecord("t", *place, key, value, 0)
    dbz._PARSE(learnt if learnt is not None else value)
    known = dbz._PARSE.known_opening(value)
    c: Any = None
    if known is not None and type(known[0]) is dict:
        lane = _lane(keys)
        table = attempt(lambda: lane.table_of(known[0]))  # a schema it cannot read: an error
        assert dbz._native is not None
        if table == "error":
            c = "error"
        elif table.native is not None:
            c = attempt(lambda: dbz._native.read(
                value, known[1], table.native, rec.key, lane.primary_keys, dbz._shared_key,
                rec.topic, rec.partition, rec.offset,
            ))  # fmt: skip
            assert c != "error", "the C read raised"
    ref = _decoded(rec, keys)
    return c, ref


def _decoded(rec: RawRecord, keys: dict[str, list[str]] | None) -> Any:
    """The decoder's answer to `rec` in the lane's form, the reference C is held to: (op, row,
    before, after) of a row change the lane takes (`DebeziumLane`'s docstring: a create, read,
    update or delete in the converter's envelope whose source names its table, whose schema's
    before and after hold the same columns, every one of them in its images); None for any
    other record; "error" when the decoder quarantines it."""
    sink = Sink()
    if not fed_alone(dbz.DebeziumJsonDecoder(DecodeContext(primary_keys=keys or {}), sink), rec):
        return "error"
    if len(sink.events) != 1 or not _lane_shaped(rec.value):
        return None
    ev = sink.events[0]
    if ev.op not in ("insert", "update", "delete", "snapshot"):
        return None
    return ev.op, lane_row(ev), lane_image(ev.before), lane_image(ev.after)


def _lane_shaped(value: Any) -> bool:
    """Whether a message is one the lane's docstring says it takes (the values aside)."""
    try:
        msg = orjson.loads(value)
    except (orjson.JSONDecodeError, TypeError):
        return False
    if type(msg) is not dict or msg.keys() != {"schema", "payload"}:
        return False
    schema, payload = msg["schema"], msg["payload"]
    if type(schema) is not dict or type(payload) is not dict:
        return False
    source = payload.get("source")
    if payload.get("op") not in ("c", "u", "d", "r") or type(source) is not dict:
        return False
    if not all(type(source.get(k)) is str and source[k] for k in ("db", "table")):
        return False
    parts = {
        f.get("field"): f.get("fields")
        for f in schema.get("fields") or []
        if type(f) is dict and f.get("field") in ("before", "after")
    }
    cols = {w: [c.get("field") for c in p] for w, p in parts.items() if type(p) is list}
    if cols.keys() != {"before", "after"} or cols["before"] != cols["after"]:
        return False
    for w in ("before", "after"):
        img = payload.get(w)
        if img is not None and (type(img) is not dict or sorted(img) != sorted(cols[w])):
            return False
    return True


def _agrees(value: bytes, learnt: bytes | None = None, **record: Any) -> Any:
    return agreeing(value, *_both(value, learnt, **record))


def test_the_c_read_is_built() -> None:
    """`make setup` builds it; a checkout without it decodes Debezium ~1.5x slower."""
    assert dbz._native is not None


def test_the_c_read_reads_the_demos_the_benchmarks_and_a_connectors_messages(
    tmp_path: Path,
) -> None:
    """The demo's changes and snapshot rows, the benchmark's generator (DECIMAL as bytes,
    Timestamp, text, binary) and a real connector's update are read by C, as Python reads
    them; every row shares its schema's types object, as in Python."""
    from benchmarks.formats import KINDS
    from benchmarks.gen import plan, write_hour

    txns = sample.workload(datetime(2026, 11, 20, tzinfo=UTC), 1, txns_per_hour=6, seed=5)
    snap = [dict(c.after, id=900 + i) for i, c in enumerate(txns[0].changes) if c.after]
    demo = [v for *_, v in sample.encode_debezium(txns, snap).records if v]
    p = plan(datetime(2026, 3, 2, 10, tzinfo=UTC), 300, 50, 0.2, 1, 3)
    write_hour(p, KINDS["debezium_json"](), tmp_path, "bench")
    bench = [v.as_py() for f in sorted(tmp_path.rglob("*.parquet")) for v in pq.read_table(f)["value"]]  # fmt: skip
    pretty = _VECTOR.read_bytes()
    assert _agrees(pretty) is None and _both(pretty)[1] not in (None, "error")
    values = [*demo, *(v for v in bench if v), orjson.dumps(json.loads(pretty))]
    assert len(demo) >= 10 and len(values) >= 250
    types = set()
    for value in values:
        got = _agrees(value)
        assert got not in (None, "error"), value[:200]
        types.add(id(got[1][3]))
    assert len(types) <= 3  # the demo's, the benchmark's and the connector's schema


_EDGE_FIELDS = [
    {"type": "int64", "field": "id"}, {"type": "string", "field": "name"},
    {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
     "parameters": {"scale": "2"}, "field": "amt"},
    {"type": "int64", "parameters": {"__debezium.source.column.type": "BIGINT UNSIGNED"},
     "field": "ts"},
]  # fmt: skip
_EDGE_SCHEMA = orjson.dumps({"type": "struct", "fields": [
    {"type": "struct", "fields": _EDGE_FIELDS, "field": "before"},
    {"type": "struct", "fields": _EDGE_FIELDS, "field": "after"},
]}).decode()  # fmt: skip
_OK = '"id":1,"name":"x","amt":"AQI=","ts":1'
_SRC = '"db":"shop","table":"orders","file":"mysql-bin.000003","pos":4,"row":0'
_EDGE_IMAGES = [  # (the after image's members, whether C reads the message itself)
    (_OK, True), ('"name":"x","ts":1,"amt":"AQI=","id":7', True),
    ('"id":-0,"name":"x","amt":"AQI=","ts":-0', True), ('"id":true,"name":false,"amt":null,"ts":null', True),
    ('"id":100000000000000000000000000000,"name":"x","amt":"AQI=","ts":1', True),
    ('"id":1,"name":"x","amt":"AQI=","ts":100000000000000000000', True),
    ('"id":1,"name":"x","amt":"/w==","ts":-1', True),
    ('"id":1,"name":"\\u00e9\\n\\ud83d\\ude00\\/\\"","amt":"AQI=","ts":1', True),
    ('"id":1,"name":"a\x7fb é","amt":"AQI=","ts":1', True),
    (' "id" : 1 ,\n"name"\t: "x" , "amt" : "AQI=" , "ts" : 1 ', True),
    ('"id":1.50,"name":"x","amt":"AQI=","ts":1', False), ('"id":10.0e0,"name":"x","amt":"AQI=","ts":1', False),
    ('"id":1,"name":1.50,"amt":"AQI=","ts":1.5', False), ('"id":' + "1" * 4400 + ',"name":"x","amt":"AQI=","ts":1', False),
    ('"id":1,"name":"\\udc00","amt":"AQI=","ts":1', False), ('"id":1,"name":"\\ud800","amt":"AQI=","ts":1', False),
    ('"id":1,"name":"\\ud800\\u0041","amt":"AQI=","ts":1', False), ('"id":1,"name":"a\x01b","amt":"AQI=","ts":1', False),
    # bytes that are not UTF-8 (written as surrogate escapes: `_edge` writes them as bytes)
    ('"id":1,"name":"\udcff","amt":"AQI=","ts":1', False), ('"id":1,"name":"\udced\udca0\udc80","amt":"AQI=","ts":1', False),
    ('"id":1,"id":2,"amt":"AQI=","ts":1', False), (_OK + ',"id":2', False), (_OK + ',"zz":2', False),
    ('"id":1,"name":"x","amt":"ZZ","ts":1', False), ('"i\\u0064":1,"name":"x","amt":"AQI=","ts":1', False),
    ('"id":01,"name":"x","amt":"AQI=","ts":1', False), ('"id":-,"name":"x","amt":"AQI=","ts":1', False),
    ('"id":1.,"name":"x","amt":"AQI=","ts":1', False), ('"id":+1,"name":"x","amt":"AQI=","ts":1', False),
    ('"id":1e,"name":"x","amt":"AQI=","ts":1', False), ('"id":[1],"name":"x","amt":"AQI=","ts":1', False),
    ('"id":1,"name":"x","amt":"AQI=","ts":1,', False), ('"id":1,"name":"x","amt":"AQI=","ts":nul', False),
]  # fmt: skip
_EDGE_SOURCES = [  # (the source's members, whether C reads the message itself)
    (_SRC, True), (_SRC + ',"db":"other"', True), (_SRC + ',"row":"2","pos":"5"', False),
    (_SRC + ',"snapshot":"LAST","gtid":null,"ts_ms":0,"ts_sec":3', True),
    (_SRC + ',"x":{"a":[1,{"b":[]}],"c":"\\t"}', True), (_SRC + ',"pos":4.0', False),
    (_SRC + ',"x":1.5', False), (_SRC + ',"file":["a"]', False), ('"table":"orders"', False),
    (_SRC + ',"x":"\\udc00"', False), (_SRC + ',"x":"\\ud800"', False), (_SRC + ',"x":"\\q"', False),
    # a skipped member's text that is not UTF-8: a surrogate, overlong, beyond U+10FFFF, 0xFF
    (_SRC + ',"x":"\udced\udca0\udc80"', False), (_SRC + ',"x":"\udce0\udc80\udc80"', False),
    (_SRC + ',"x":"\udcf4\udc90\udc80\udc80"', False), (_SRC + ',"x":"a\udcff"', False),
    (_SRC + ',"x":"\x01"', False), (_SRC + ',"x":[1,]', False), (_SRC + ',"x":{"a":1,}', False),
    # the row C builds: the GTID's number where no file is named, the time from ts_sec, the
    # position's numbers clamped into the order key, snapshot words in any case
    ('"db":"shop","table":"orders","gtid":"3E11FA47-71CA-11E1-9E33-C80AA9429562:23","row":2', True),
    ('"db":"shop","table":"orders","file":"","gtid":"0-1-42","ts_sec":1700000000', True),
    ('"db":"shop","table":"orders","file":null,"gtid":"u:tag:7","ts_ms":null,"ts_sec":0', True),
    ('"db":"shop","table":"orders","gtid":"u:x","pos":-3,"row":-1', True),
    ('"db":"shop","table":"orders","gtid":"1-2","row":4294967296', True),
    ('"db":"shop","table":"orders","gtid":"u:' + "9" * 30 + '"', True),
    (_SRC + ',"pos":-5,"row":99999999999', True), ('"db":"shop","table":"orders","file":"b"', True),
    ('"db":"shop","table":"orders","file":"42","pos":1', True),
    ('"db":"shop","table":"orders","file":"mysql-bin.' + "9" * 40 + '","pos":9223372036854775807', True),
    (_SRC + ',"snapshot":"FIRST_IN_DATA_COLLECTION"', True), (_SRC + ',"snapshot":true', True),
    (_SRC + ',"snapshot":"İncremental"', False), (_SRC + ',"ts_ms":true', False),
    (_SRC + ',"pos":9223372036854775808', False), (_SRC + ',"ts_sec":9223372036854776', False),
    (_SRC + ',"gtid":" u:5"', False), (_SRC + ',"gtid":"u:٣"', False), (_SRC + ',"file":"a b.1"', False),
    (_SRC + ',"file":"x' + "1" * 300 + '"', False), (_SRC + ',"gtid":5', False),
]  # fmt: skip


def _edge(after: str, src: str = _SRC, tail: str = "") -> bytes:
    payload = f'{{"before":null,"after":{{{after}}},"source":{{{src}}},"op":"c"{tail}}}'
    return f'{{"schema":{_EDGE_SCHEMA},"payload":{payload}}}'.encode(errors="surrogateescape")


def test_the_c_read_on_the_edges_of_json() -> None:
    """Numbers, strings, escapes, UTF-8, duplicates and members one at a time: C reads what
    it reads as Python does (-0, big integers, escapes, whitespace, members in any order or
    twice) and leaves the rest (fractions, lone surrogates, control characters, invalid
    UTF-8 or JSON, an image without a column or with one twice) to Python."""
    learnt = _edge(_OK)
    for after, c_reads in _EDGE_IMAGES:
        c = _agrees(_edge(after), learnt)
        assert (c not in (None, "error")) == c_reads, after
    for src, c_reads in _EDGE_SOURCES:
        c = _agrees(_edge(_OK, src), learnt)
        assert (c not in (None, "error")) == c_reads, src
    for tail, c_reads in [(',"op":"u","before":{' + _OK + "}", True), (',"transaction":"t"', True),
                          (',"transaction":{"id":"t","id":"u"}', True), (',"op":"t"', False),
                          # a member twice: the second whole, as a dict has it
                          (',"transaction":{"id":"t"},"transaction":"x"', True),
                          (',"transaction":{"id":"t"},"transaction":{"total_order":1}', True),
                          (',"source":{"db":"shop","table":"orders","gtid":"u:3"}', True)]:  # fmt: skip
        c = _agrees(_edge(_OK, _SRC, tail), learnt)
        assert (c not in (None, "error")) == c_reads, tail
    for end, c_reads in [(" \n\t\r", True), ("x", False), ("}", False), (" ,", False)]:
        c = _agrees(_edge(_OK) + end.encode(), learnt)
        assert (c not in (None, "error")) == c_reads, end


_FIELDS = [
    {"type": "int32"}, {"type": "int64"}, {"type": "string"}, {"type": "boolean"},
    {"type": "double"}, {"type": "bytes"},
    {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
     "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
    {"type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    {"type": "int64", "name": "io.debezium.time.Timestamp"},
    {"type": "int32", "name": "io.debezium.time.Date"},
    {"type": "int64", "name": "io.debezium.time.MicroTime"},
    {"type": "string", "name": "io.debezium.time.ZonedTimestamp"},
    {"type": "string", "name": "io.debezium.data.Json"},
    {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"},
    {"type": "int64", "parameters": {"__debezium.source.column.type": "BIGINT UNSIGNED"}},
]  # fmt: skip
_NAMES = ["id", "name", "amt", "ts", "é", "x y", 'a"b', "n\\m"]
"""Column names; the last two are written with escapes (which C leaves to Python)."""
_VALUES = st.one_of(
    st.text(max_size=5),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 2**63, -(2**63) - 1, 10**30, 19700101]),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["AQI=", "/w==", "", "ZZ", "2026-03-02T10:00:00Z", '{"a":1}', "\x00"]),
    st.sampled_from([
        Raw("-0"), Raw('"\\u00e9\\n"'), Raw('"\\ud83d\\ude00"'), Raw('"\\ud800"'),
        Raw('"\\udc00x"'), Raw("1E2"), Raw('"a\\/b\\"c"'), Raw('"x\\u0000y"'), Raw("[1,2]"),
        Raw('{"wkb":"AQ==","srid":0}'), Raw("{}"), Raw('{"value":"AQ==","scale":1}'),
        Raw("01"), Raw('"\\x"'), Raw("tru"), Raw("1" * 4400),
    ]),
)  # fmt: skip
_TAME_VALUES = st.one_of(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), st.none())
_SOURCE = {
    "db": st.sampled_from(["shop"] * 6 + ["", 5, None, Raw('"sh\\u006fp"')]),
    "table": st.sampled_from(["orders"] * 6 + ["", None, ["x"]]),
    "snapshot": st.sampled_from(["true", "false", "LAST", "Incremental", True, False, None, 1, "İ"]),
    "file": st.sampled_from(["mysql-bin.000003", "", None, 3, "bin", "mysql-bin.00000٣"]),
    "pos": st.sampled_from([4, 4, 4, 0, None, "123", -1, 2**70, 1.5, True]),
    "row": st.sampled_from([0, 1, "2", None, True, -1, 2**40]),
    "gtid": st.sampled_from(["3E11FA47-71CA-11E1-9E33-C80AA9429562:5", None, "", 3, "0-1-7"]),
    "ts_ms": st.sampled_from([1700000000000, None, 0, "5", 2**70]),
    "ts_sec": st.sampled_from([1700000000, None, "3"]),
    "version": st.sampled_from(["2.7.0.Final"] * 3 + [Raw('{"a":[1,{"b":null}]}'), Raw("1.5")]),
}  # fmt: skip
_TX = st.sampled_from([
    None, Obj(("id", "tx-1"), ("total_order", 1)), Obj(("id", None)), Obj(("id", 5)), Obj(),
    "tx", 5, [], Obj(("id", Obj())), Obj(("id", "a"), ("id", "b")),
])  # fmt: skip


@st.composite
def _image(draw: st.DrawFn, cols: list[str], tame: bool) -> Any:
    pairs: list[tuple[Any, Any]] = [
        (c, draw(_TAME_VALUES if tame or not rare(draw) else _VALUES)) for c in cols
    ]
    if tame:
        return Obj(*pairs)
    pairs = hostile_members(draw, pairs, _VALUES)
    if rare(draw) and rare(draw):
        return draw(st.sampled_from([None, "x", 5, Raw("[]")]))
    return Obj(*pairs)


@st.composite
def _source(draw: st.DrawFn, tame: bool) -> Any:
    pairs: list[tuple[Any, Any]] = [
        ("db", "shop"), ("table", "orders"), ("file", "mysql-bin.000003"),
        ("pos", draw(st.integers(0, 2**40))), ("row", draw(st.integers(0, 9))),
        ("ts_ms", 1700000000000), ("snapshot", "false"), ("version", "2.7.0.Final"),
    ]  # fmt: skip
    if tame:
        return Obj(*pairs)
    for i in range(len(pairs)):
        if rare(draw):
            pairs[i] = (pairs[i][0], draw(_SOURCE[pairs[i][0]]))
    if rare(draw):
        pairs.append(draw(st.sampled_from(sorted(_SOURCE))))
        pairs[-1] = (pairs[-1], draw(_SOURCE[pairs[-1]]))
    if rare(draw):
        pairs = draw(st.permutations(pairs))
    if rare(draw) and rare(draw):
        return draw(st.sampled_from([None, "s", Obj()]))
    return Obj(*pairs)


_PLAIN_FIELDS = [{"type": "int64"}, {"type": "string"}, {"type": "int32"}]


@st.composite
def _message(draw: st.DrawFn, tame: bool = False) -> tuple[bytes, bytes]:
    """A JSON converter envelope: a schema of 1-4 columns, a payload of an op, a source and
    images, maybe a transaction and other members; untamed, each of many variations now and
    then (whitespace, members in any order, twice or left out, other values, things after the
    payload, ...)."""
    names = _NAMES[:6] if tame or not rare(draw) else _NAMES
    cols = draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True))
    kinds = _PLAIN_FIELDS if tame else _PLAIN_FIELDS * 4 + _FIELDS
    fields = [dict(draw(st.sampled_from(kinds)), field=c) for c in cols]
    schema = {"type": "struct", "fields": [
        {"type": "struct", "fields": fields, "optional": True, "field": "before"},
        {"type": "struct", "fields": fields, "optional": True, "field": "after"},
        {"type": "struct", "fields": [], "field": "source"},
        {"type": "string", "field": "op"},
    ]}  # fmt: skip
    op = draw(st.sampled_from(["c", "u", "d", "r"]))
    before = draw(_image(cols, tame)) if op in "ud" else None
    after = draw(_image(cols, tame)) if op in "cur" else None
    pairs: list[tuple[Any, Any]] = [("before", before), ("after", after),
                                    ("source", draw(_source(tame))), ("op", op)]  # fmt: skip
    sp = end = ""
    if not tame:
        if rare(draw):
            pairs[3] = ("op", draw(st.sampled_from(["t", "x", None, 5, "C"])))
        if draw(st.booleans()):
            pairs.append(("transaction", draw(_TX)))
        extras = st.sampled_from([("ts_ms", 1700000000001), ("ts_us", 2**62),
                                  ("nested", Raw('{"a":[true,false,null,"\\t",{}]}'))])  # fmt: skip
        pairs += draw(st.lists(extras, max_size=2))
        pairs, sp, end = hostile_layout(draw, pairs)
    opening = f'{{"schema":{orjson.dumps(schema).decode()},'
    text = f'{opening}{sp}"payload"{sp}:{sp}{json_text(Obj(*pairs), sp)}{end}'
    # and a message of the same schema a stream read before (C reads what follows it)
    return (text + "}" * (end != "}")).encode(), f'{opening}"payload":null}}'.encode()


@settings(max_examples=examples(600), deadline=None)
@given(_message())
def test_the_c_read_answers_as_python_or_leaves_it(message: tuple[bytes, bytes]) -> None:
    _agrees(*message)


@settings(max_examples=examples(150), deadline=None)
@given(_message(tame=True))
def test_the_c_read_reads_plain_messages_itself(message: tuple[bytes, bytes]) -> None:
    """Compact envelopes of strings, 64-bit integers and NULLs, with a full source: C reads
    each that the lane takes (else the tests above could pass with C leaving everything to
    Python); one a converter refuses (a DECIMAL's base64, a date's number) it refuses too."""
    c, py = _both(*message)
    assert c == py if py not in (None, "error") else c in (None, "error"), (message, c, py)


_DEMO = [v for *_, v in sample.encode_debezium(
    sample.workload(datetime(2026, 11, 20, tzinfo=UTC), 1, txns_per_hour=4, seed=3)
).records if v]  # fmt: skip


@settings(max_examples=examples(1500), deadline=None)
@given(st.data())
def test_damaged_messages_are_refused_or_read_as_python_reads_them(data: st.DataObject) -> None:
    """A demo message with a byte changed, cut out or added after its schema (C reads only
    what follows the schema text it knows)."""
    original = data.draw(st.sampled_from(_DEMO))
    opening = original.index(b',"payload"') + 1
    _agrees(damaged(data, original, opening), learnt=original)


_TEMPORAL_BOUNDS = [
    -62135596800000, -62135596800001, 253402300799999, 253402300800000, 0, -1, 86399999,
    -86400000, 951782400000, 4102444800000,
]  # fmt: skip


@st.composite
def _typed_message(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A message of a DECIMAL (of a drawn scale), Timestamp, MicroTimestamp and Date column,
    whose values C converts itself (canonical base64 of up to 8 bytes, 64-bit integers)
    where it can: bytes of any length, base64 written in other ways, numbers at and beyond
    the years 1-9999."""
    scale = draw(st.sampled_from(["2", "1", "0", "-2", "30", "100", "101", "x", None]))
    params = {} if scale is None else {"scale": scale}
    fields = [
        {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": params,
         "field": "d"},
        {"type": "int64", "name": "io.debezium.time.Timestamp", "field": "t"},
        {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "field": "u"},
        {"type": "int32", "name": "io.debezium.time.Date", "field": "day"},
    ]  # fmt: skip
    schema = orjson.dumps({"type": "struct", "fields": [
        {"type": "struct", "fields": fields, "field": "before"},
        {"type": "struct", "fields": fields, "field": "after"},
    ]}).decode()  # fmt: skip
    raw = draw(st.binary(max_size=10))
    text = base64.b64encode(raw).decode()
    decimal = draw(st.sampled_from([text, text, text.rstrip("="), text + "=", " " + text,
                                    text.replace("A", "-"), draw(st.text("AB+/=", max_size=6))]))  # fmt: skip
    ms = draw(st.sampled_from(_TEMPORAL_BOUNDS) | st.integers(-(2**63), 2**63 - 1))
    us = draw(st.sampled_from([x * 1000 + 999 for x in _TEMPORAL_BOUNDS]) | st.integers(-(2**63), 2**63 - 1))  # fmt: skip
    days = draw(st.sampled_from([-719162, -719163, 2932896, 2932897, 0, -1, 11016]) | st.integers(-(2**40), 2**40))  # fmt: skip
    after = json_text(Obj(("d", decimal), ("t", ms), ("u", us), ("day", days)))
    source = '{"db":"shop","table":"orders","file":"mysql-bin.000003","pos":4,"row":0}'
    opening = f'{{"schema":{schema},'
    message = f'{opening}"payload":{{"after":{after},"source":{source},"op":"c"}}}}'
    return message.encode(), f'{opening}"payload":null}}'.encode()


@settings(max_examples=examples(500), deadline=None)
@given(_typed_message())
def test_the_c_read_converts_decimals_and_times_as_python(message: tuple[bytes, bytes]) -> None:
    c, py = _both(*message)
    assert c == py if py not in (None, "error") else c in (None, "error"), (message, c, py)


_RECORD_KEYS = [  # (a record key, whether C reads it itself)
    (b'{"id":1}', True), (None, True), (b"", True), (b' {"id":1,"k":"x"} \n', True), (b"{}", True),
    (b'{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],'
     b'"optional":false,"name":"shop.orders.Key"},"payload":{"id":1,"b":null}}', True),
    (b'{"payload":{"id":1},"schema":null}', True), (b'{"schema":1,"payload":null}', True),
    (b'{"schema":1,"payload":[1]}', True), (b'{"payload":{"id":1}}', True),
    ('{"é":1,"x y":true}'.encode(), True), (b'{"id":-999999999999999999}', False),
    (b'{"id":1,"id":2}', False), (b'{"i\\u0064":1}', False), (b'{"id":1.5}', False),
    (b'{"id":' + b"1" * 400 + b"}", False), (b'{"id":' + b"1" * 19 + b"}", False),
    (b"null", False), (b"5", False), (b'"id"', False), (b"[1]", False), (b"{", False),
    (b'{"id":1}x', False), (b'\xef\xbb\xbf{"id":1}', False), (b'{"id":"\xff"}', False),
    (b'{"schema":1,"payload":{"a":1,"a":2}}', False),
]  # fmt: skip


def test_the_c_read_takes_the_key_columns_as_python() -> None:
    """The row's key columns: the names of the record key's object (or of its `payload`
    beside a `schema`), none for no key, the pipeline's configured key where it names the
    table; C reads the keys it can and leaves the rest to Python, which then reads them as
    before (orjson: a failed parse means no key columns)."""
    value = _edge(_OK)
    for key, c_reads in _RECORD_KEYS:
        c = _agrees(value, key=key)
        assert (c not in (None, "error")) == c_reads, key
    configured = {"shop.orders": ["k", "id"], "other.t": ["x"]}
    c = _agrees(value, key=b'{"id":1}', keys=configured)
    assert c[1][2] == ["k", "id"]
    c = _agrees(value, key=b"not json", keys=configured)
    assert c[1][2] == ["k", "id"]  # the configured key: the record key is not read at all
    for keys in ({"shop.orders": []}, {"other.t": ["x"]}):  # an empty key, another table's
        c = _agrees(value, key=b'{"id":1}', keys=keys)
        assert c[1][2] == ["id"]
    rows = [_both(value, key=k)[0][1] for k in (b'{"id":1}', b'{"id":2}', b'{"id":3}')]
    assert len({id(r[2]) for r in rows}) == 1, "the rows share one key list, as in Python"


@settings(max_examples=examples(300), deadline=None)
@given(
    st.sampled_from([k for k, _ in _RECORD_KEYS]),
    st.sampled_from([(0, 0), (1, 7), (2**32 - 1, 2**63 - 1), (2**32, 5), (-1, 3), (3, -1)]),
    st.sampled_from([None, {"shop.orders": ["id"]}, {"shop.orders": []}]),
    _message(),
)
def test_the_c_read_of_any_key_and_place_answers_as_python(
    key: bytes | None,
    place: tuple[int, int],
    keys: dict[str, list[str]] | None,
    message: tuple[bytes, bytes],
) -> None:
    """Hostile messages with each record key, at the edges of a partition's and an offset's
    range (the order key's tail: Python clamps what C leaves to it) and with configured keys."""
    _agrees(*message, key=key, keys=keys, place=place)
