"""A decoder's fast lane (`recon.decode.lane`) changes nothing but the speed: the DataWorks,
Debezium and Tencent decode of any stream, the lane on, gives the rows the decoder alone gives (events,
quarantine, carry, shapes and counters; hypothesis), and the lane does take the common
records."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from recon._proto import tencent_subscribe_pb2 as pb
from recon.config import TableConfig
from recon.core.model import RAW_SCHEMA, RawRecord
from recon.decode import stream
from recon.decode.base import DecodeContext
from recon.decode.formats import dataworks_json as dw_json
from recon.decode.formats import debezium_json as dbz_json
from recon.decode.formats.dataworks_json import DataworksJsonDecoder, DataworksLane
from recon.decode.formats.debezium_json import DebeziumLane
from recon.decode.formats.tencent_dts_pb import TencentLane
from recon.decode.lane import LaneRows
from recon.decode.stream import BinaryRows, RawRun, _StreamDriver, decode_raw
from recon.decode.summary import shape_texts
from recon.demo import sample
from tests.support.examples import examples

_COLUMNS = [{"name": "id", "type": "LONG"}, {"name": "v", "type": "STRING"}]
_SCHEMAS = {
    "t": {
        "dataColumn": [*_COLUMNS, {"name": "d", "type": "DATE"}],
        "primaryKey": ["id"],
        "source": {"dbName": "s", "tableName": "t"},
    },
    "u": {
        "dataColumn": _COLUMNS,
        "primaryKey": ["id"],
        "source": {"dbName": "s", "tableName": "u"},
    },
    # the same table, another schema (another object: the decoder merges an update's types)
    "t2": {
        "dataColumn": [*_COLUMNS, {"name": "w", "type": "STRING"}],
        "primaryKey": ["id"],
        "source": {"dbName": "s", "tableName": "t"},
    },
    "nokey": {"dataColumn": _COLUMNS, "source": {"dbName": "s", "tableName": "k"}},
    # a producer's schema of another form: the lane cannot read it, the decoder quarantines
    "bad": {"dataColumn": 5, "primaryKey": ["id"]},
    "dotted": {"dataColumn": _COLUMNS, "primaryKey": ["id"], "source": {"dbName": "s.t"}},
}
_VALUES = st.one_of(
    st.integers(-5, 5), st.text(max_size=3), st.none(), st.booleans(), st.just(2.5),
    st.just(2**70), st.just({"x": [1]}),
)  # fmt: skip
_IMAGES = st.none() | st.fixed_dictionaries(
    {"id": st.integers(0, 3)}, optional={"v": _VALUES, "d": _VALUES, "extra": _VALUES}
)
_OPS = ["INSERT", "DELETE", "UPDATE_BEFOR", "UPDATE_AFTER"]


def _message(
    op: str, seq: Any, schema: str, before: Any, after: Any, event_time: Any
) -> dict[str, Any]:
    return {
        "schema": _SCHEMAS[schema],
        "payload": {
            "op": op,
            "sequenceId": seq,
            "timestamp": {"eventTime": event_time},
            "before": None if before is None else {"dataColumn": before},
            "after": None if after is None else {"dataColumn": after},
        },
    }


_MESSAGE = st.builds(
    _message,
    op=st.sampled_from(_OPS) | st.sampled_from(["MHEARTBEAT", "CREATE", "GTID", "BOGUS"]),
    seq=st.sampled_from(["7", "8", "9", "0009", " 8", "x", "²", 7]) | st.none(),
    schema=st.sampled_from(sorted(_SCHEMAS)),
    before=_IMAGES,
    after=_IMAGES,
    event_time=st.sampled_from([1, None, "1", 2**63, True]),
)


@st.composite
def _update(draw: st.DrawFn) -> list[dict[str, Any]]:
    """An update as the producer writes it: UPDATE_BEFOR, then its UPDATE_AFTER (or a record
    that is not its AFTER: another sequenceId, table or op)."""
    seq = draw(st.sampled_from(["7", "8", "9"]))
    schema = draw(st.sampled_from(["t", "t", "u", "t2", "dotted"]))
    after_schema = draw(st.sampled_from([schema, schema, "t2", "u"]))
    after_seq = draw(st.sampled_from([seq, seq, "6"]))
    after_op = draw(st.sampled_from(["UPDATE_AFTER", "UPDATE_AFTER", "INSERT", "UPDATE_BEFOR"]))
    before, after = draw(_IMAGES.filter(bool)), draw(_IMAGES.filter(bool))
    return [
        _message("UPDATE_BEFOR", seq, schema, before, None, 1),
        _message(after_op, after_seq, after_schema, draw(_IMAGES), after, 1),
    ]


def _text(msg: dict[str, Any], compact: bool = True) -> bytes:
    """The message's JSON: compact as producers write it (the C reads take it: the schema's
    text opens it as a text seen before), or with json's spaces (the Python read's)."""
    return json.dumps(msg, separators=(",", ":") if compact else None).encode()


_RECORD = (
    _MESSAGE.map(lambda m: [_text(m)])
    | _MESSAGE.map(lambda m: [_text(m, compact=False)])
    | _update().map(lambda pair: [_text(m) for m in pair])
    | st.sampled_from([b"", b"  ", b"{", b"[]", b'{"payload": 1}', b"null"]).map(lambda v: [v])
)
_STREAM = st.lists(
    st.tuples(_RECORD, st.integers(0, 1), st.booleans()), max_size=30
)  # (values, partition, carried)


def _records(stream_: list[tuple[list[bytes], int, bool]]) -> list[RawRecord]:
    """The stream's records in offset order per partition; `carried`: its first record came
    from the hour before."""
    recs: list[RawRecord] = []
    offsets = Counter[int]()
    for values, partition, carried in stream_:
        for i, value in enumerate(values):
            offset = offsets[partition]
            offsets[partition] += 1
            rec = RawRecord("t", partition, offset, None, value, 0, carried=carried and i == 0)
            recs.append(rec)
    return sorted(recs, key=lambda r: (r.partition, r.offset))


def _in_place(values: list[bytes | None]) -> BinaryRows:
    """Values as the decode tasks read a partition out of a dump file that holds others: rows
    of an Arrow array (itself a slice) between other partitions' rows."""
    padded = pa.array(
        [b"x", b"other", *(v for value in values for v in (value, None))], pa.binary()
    )
    return BinaryRows(padded.slice(1), np.arange(1, 2 * len(values), 2))


def _runs(recs: list[RawRecord], size: int) -> list[RawRecord | RawRun]:
    """The records as the decode tasks feed the dumps' (`RawRun`s of at most `size` records
    of one partition, none carried or to skip), a carried record or one to skip alone. An odd
    `size`: the values as rows of an Arrow array (`_in_place`), else a list (the staging
    copy's runs)."""
    out: list[RawRecord | RawRun] = []
    run: list[RawRecord] = []

    def end_run() -> None:
        if run:
            cols: list[Any] = [[getattr(r, f) for r in run] for f in stream._RAW_NAMES]
            cols = [[None if f == "carried" else v for v in c] for f, c in
                    zip(stream._RAW_NAMES, cols, strict=True)]  # fmt: skip
            if size % 2:
                cols[stream._RAW_NAMES.index("value")] = _in_place(cols[4])
            out.append(RawRun(cols))
            run.clear()

    for rec in recs:
        if run and (len(run) >= size or run[-1].partition != rec.partition):
            end_run()
        if rec.carried or rec.skip:
            end_run()
            out.append(rec)
        else:
            run.append(rec)
    end_run()
    return out


def _rows(
    recs: list[RawRecord],
    lanes: bool,
    fmt: str = "dataworks_json",
    ctx: DecodeContext | None = None,
    run: int = 0,
) -> Counter[str]:
    """The output's rows; a shape as the decode's summary reads it (any event of the shape
    stands for it: which one differs with the lane). `run`: the records fed as runs of at
    most this many (`_runs`; 0: one by one)."""
    copies = [RawRecord(**{f: getattr(r, f) for f in r.__dataclass_fields__}) for r in recs]
    ctx = ctx or DecodeContext(primary_keys={"s.k": ["id"]})
    fed = _runs(copies, run) if run else copies
    out = decode_raw(iter(fed), fmt, ctx, shapes=True, lanes=lanes)
    rows = [row for batch in out for row in batch.to_pylist()]
    return Counter(
        repr(("shape", r["db"], r["tbl"], r["op"], shape_texts(r), r["n"]))
        if r["kind"] == "shape"
        else repr(sorted(r.items()))
        for r in rows
    )


_PAIR = [
    _text(_message("UPDATE_BEFOR", "9", "t", {"id": 1, "v": "a"}, None, 1)),
    _text(_message("UPDATE_AFTER", "9", "t", None, {"id": 1, "v": "b"}, 1)),
]
_AFTERS = [  # UPDATE_AFTERs the lane leaves to the decoder after `_PAIR`'s BEFOR
    _text(_message("UPDATE_AFTER", "8", "t", None, {"id": 1, "v": "b"}, 1)),  # another update's
    _text(_message("UPDATE_AFTER", "9", "t2", None, {"id": 1, "w": "b"}, 1)),  # other types
]
_PAIR_T2 = [  # `_PAIR` in the table's other schema
    _text(_message("UPDATE_BEFOR", "9", "t2", {"id": 1, "w": "a"}, None, 1)),
    _text(_message("UPDATE_AFTER", "9", "t2", None, {"id": 1, "w": "b"}, 1)),
]
_PAIR_OWN_BEFORE = [  # an UPDATE_AFTER with a before image of its own (which the update takes)
    _PAIR[0],
    _text(_message("UPDATE_AFTER", "9", "t", {"id": 1, "v": "z"}, {"id": 1, "v": "b"}, 1)),
]
_BAD = [_text(_message("INSERT", "7", "bad", None, {"id": 1}, 1))]
_INSERTS = [
    _text(_message("INSERT", str(seq), "t", None, {"id": seq, "v": "a"}, 1)) for seq in (7, 8)
]
_NULLS = [  # NULL values and text beyond ASCII: the image buffers' validity and UTF-8 sizes
    _text(_message("INSERT", str(seq), "t", None, {"id": seq, "v": v, "d": None}, 1))
    for seq, v in ((7, None), (8, "ü€😀"), (9, "a"))
]
_ALONE = [
    _text(_message("UPDATE_AFTER", "9", "t", None, {"id": 1, "v": "b"}, 1)),  # unpaired
    _text(_message("INSERT", "9", "t", None, {"id": 1, "x": "b"}, 1)),  # undeclared column
]


@settings(max_examples=examples(400), deadline=None)
@given(stream_=_STREAM, flush=st.sampled_from([2, 3, 20_000]), run=st.sampled_from([1, 2, 3, 50]))
@example(stream_=[(_PAIR, 0, False)], flush=20_000, run=50)
@example(stream_=[(_PAIR[:1], 0, False), (_PAIR, 0, False)], flush=20_000, run=50)
@example(stream_=[(_PAIR, 0, False), (_PAIR[:1], 1, False), (_PAIR[1:], 1, False)], flush=2, run=50)
@example(stream_=[([_PAIR[0], _AFTERS[0]], 0, False)], flush=20_000, run=50)
@example(stream_=[([_PAIR[0], _AFTERS[1]], 0, False)], flush=20_000, run=50)
@example(stream_=[(_ALONE, 0, False)], flush=20_000, run=50)
@example(stream_=[(_INSERTS, 0, True)], flush=20_000, run=50)  # a shape's events by both paths
@example(stream_=[(_NULLS * 2, 0, False)], flush=20_000, run=50)
@example(stream_=[(_INSERTS * 3, 0, False), (_PAIR * 3, 0, False)], flush=3, run=50)
@example(stream_=[(_PAIR * 2, 0, False)], flush=20_000, run=3)  # a run ends in a BEFOR
# the record loop's pairs, after a pair of their shape (the loop takes a counted shape only)
@example(stream_=[(_PAIR + [_PAIR[0], _PAIR[0]], 0, False)], flush=20_000, run=50)
@example(stream_=[(_PAIR + [_PAIR[0], _AFTERS[0]], 0, False)], flush=20_000, run=50)
@example(stream_=[(_PAIR_T2 + [_PAIR[0], _AFTERS[1]], 0, False)], flush=20_000, run=50)
@example(stream_=[(_PAIR + _PAIR_OWN_BEFORE, 0, False)], flush=20_000, run=50)
@example(stream_=[(_PAIR + _ALONE[:1], 0, False)], flush=20_000, run=50)
@example(stream_=[(_BAD * 2 + _INSERTS * 2, 0, False)], flush=20_000, run=50)  # a bad schema
# a batch filled by a stream's end (its held BEFOR applied alone): drained after the next record
@example(stream_=[([_PAIR[0], _ALONE[1]], 0, False), (_ALONE[1:], 1, False)], flush=2, run=1)
def test_the_lane_decodes_what_the_decoder_decodes(
    stream_: list[tuple[list[bytes], int, bool]], flush: int, run: int
) -> None:
    """Every output row, the lane on or off, its records fed one by one or as runs (its
    record loop in C, `run`: at most this many a run), in any stream: row changes of every op,
    updates joined or not, unpaired and repeated halves, other tables and schemas of one table,
    undeclared columns, values of every JSON type, control records and damage, carried records,
    two partitions, and flushes between records (`flush`: the rows per output batch)."""
    recs = _records(stream_)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stream, "_FLUSH_ROWS", flush)
        alone = _rows(recs, lanes=False)
        assert _rows(recs, lanes=True) == alone
        assert _rows(recs, lanes=True, run=run) == alone


def test_the_lane_takes_the_common_records() -> None:
    """Inserts, deletes and an update's two records go by the lane: none reaches the decoder's
    `handle` (counted by a decoder class that counts its calls)."""
    handled: list[int] = []

    class Counting(DataworksJsonDecoder):
        def handle(self, rec: RawRecord, msg: dict[str, Any]) -> None:
            handled.append(rec.offset)
            super().handle(rec, msg)

    values = [
        _text(_message("INSERT", "7", "t", None, {"id": 1, "v": "a", "d": 1}, 1)),
        *_PAIR,
        _text(_message("DELETE", "10", "t", {"id": 1, "v": "b"}, None, 1)),
        _text(_message("MHEARTBEAT", None, "t", None, None, 1)),
    ]
    for value in values:  # each schema's text read before, as a stream's earlier records do
        dw_json._PARSE(value)
    driver = _StreamDriver("dataworks_json", DecodeContext())
    driver.cls = Counting
    for offset, value in enumerate(values):
        driver.feed(RawRecord("t", 0, offset, None, value, 0))
    driver.finish()
    assert handled == [4]  # the heartbeat: the decoder's
    assert driver.lane_rows.ops == ["insert", "update", "delete"]
    assert Counting.lane is DataworksLane
    stats = {stat: n for (_, _, stat), n in driver.sink.stats.items()}
    assert stats["update_pairs_joined"] == 1 and stats["records_consumed"] == 5


@pytest.mark.parametrize("in_place", [False, True])
def test_the_lanes_record_loop_takes_a_runs_common_records(in_place: bool) -> None:
    """Fed as a run (`RawRun`: how the decode tasks feed the dumps), inserts, deletes and
    updates' two records go by the lane's record loop in C: Python's `take` sees only the
    first record of each shape (its `Event` shows the shape), the record the decoder takes,
    and what comes while the decoder holds a record; the counts are the records'."""
    taken: list[int] = []

    class Counting(DataworksLane):
        def take(self, rec: RawRecord) -> int | None:
            taken.append(rec.offset)
            return super().take(rec)

    def msg(op: str, seq: int, before: Any = None, after: Any = None) -> bytes:
        return _text(_message(op, str(seq), "t", before, after, 1))

    row = {"id": 1, "v": "a", "d": 1}
    values = [
        *(msg("INSERT", s, after=row) for s in (1, 2, 3)),  # 0-2
        *(msg(op, s, row, row) for s in (4, 5) for op in ("UPDATE_BEFOR", "UPDATE_AFTER")),
        msg("DELETE", 6, before=row),  # 7
        msg("DELETE", 7, before=row),
        # 9-12: updates whose before holds fewer columns, of the shape of their after's names
        *(
            msg(op, s, {"id": 1, "v": "a"}, row)
            for s in (8, 9)
            for op in ("UPDATE_BEFOR", "UPDATE_AFTER")
        ),
        _text(_message("MHEARTBEAT", None, "t", None, None, 1)),  # 13: the decoder's
        msg("INSERT", 10, after=row),
        # 15: no UPDATE_AFTER follows it: the decoder's, which holds it to the end
        msg("UPDATE_BEFOR", 11, row, row),
        msg("INSERT", 12, after=row),
    ]
    cols = [["t"] * len(values), [0] * len(values), list(range(len(values))),
            [None] * len(values), values, [0] * len(values), [None] * len(values),
            [None] * len(values), [None] * len(values)]  # fmt: skip
    for value in values:  # each schema's text read before, as a stream's earlier records do
        dw_json._PARSE(value)
    driver = _StreamDriver("dataworks_json", DecodeContext())
    driver.lane_class = Counting
    if in_place:  # read from an Arrow array's buffers, between other partitions' rows
        cols[4] = _in_place(values)
    assert list(driver.feed_run(RawRun(cols))) == []
    driver.finish()
    assert taken == [0, 3, 4, 7, 13, 15, 16]
    ops = ["insert"] * 3 + ["update"] * 2 + ["delete"] * 2 + ["update"] * 2 + ["insert"]
    assert driver.lane_rows.ops == ops
    assert [r[15] for r in driver.lane_rows.rows] == [0, 1, 2, 4, 6, 7, 8, 10, 12, 14]
    # the decoder's: the insert after the BEFOR it holds, then the BEFOR applied alone
    assert [(e.offset, e.op) for e in driver.sink.events] == [(16, "insert"), (15, "delete")]
    stats = {stat: n for (_, _, stat), n in driver.sink.stats.items()}
    assert stats["update_pairs_joined"] == 4 and stats["update_befor_applied_alone"] == 1
    assert stats["records_in"] == stats["records_consumed"] == 17
    shapes = {key[2]: counted[1] for key, counted in driver.lane_rows.shapes.items()}
    assert shapes == {"insert": 4, "update": 4, "delete": 2}


def test_a_batch_is_a_run_per_partition_unless_a_record_is_carried_or_skips() -> None:
    """`runs_of`: a sorted raw batch as a `RawRun` per (topic, partition); one by one when a
    record in it was carried in, or has entries to skip (the lanes take none such)."""
    recs = [RawRecord(t, p, o, None, b"v", 0) for t, p, o in
            [("a", 0, 1), ("a", 0, 2), ("a", 1, 1), ("b", 1, 1), ("b", 1, 5)]]  # fmt: skip

    def batch(recs: list[RawRecord]) -> pa.RecordBatch:
        rows = [{n: getattr(r, n) for n in stream._RAW_NAMES} for r in recs]
        return pa.RecordBatch.from_pylist(rows, schema=RAW_SCHEMA)

    runs = list(stream.runs_of(batch(recs)))
    assert [(r.start, r.end) for r in runs] == [(0, 2), (2, 3), (3, 5)]  # type: ignore[union-attr]
    assert list(stream.flat_records(runs)) == recs
    for odd in ({"carried": True}, {"skip": 2}):
        changed = [recs[0], RawRecord("a", 0, 2, None, b"v", 0, **odd), *recs[2:]]  # type: ignore[arg-type]
        assert list(stream.runs_of(batch(changed))) == changed


def test_the_record_loops_refuse_arguments_out_of_their_run() -> None:
    """A lane's C record loop called wrongly raises (a bug in its caller), never reads past
    its columns."""
    from recon.decode.formats import _dataworks_lane, _debezium_lane, _tencent_lane

    sink = LaneRows().sink()
    cols: list[Any] = [[b"{}"], [0]]
    with pytest.raises(TypeError, match="run takes 10 arguments"):
        _dataworks_lane.run(*cols)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="not lists to the end"):
        _dataworks_lane.run(*cols, 0, 2, 9, [], "t", 0, sink, ("i", "d", "u"))
    with pytest.raises(ValueError, match="not lists to the end"):
        _tencent_lane.run(*cols, -1, 1, 9, 0, None, "t", 0, sink)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not lists to the end"):
        _debezium_lane.run(cols[0], (None,), cols[1], 0, 1, 9, [], {}, None, "t", 0, sink)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="LaneRows.sink"):
        _debezium_lane.run(cols[0], [None], cols[1], 0, 1, 9, [], {}, None, "t", 0, ())  # type: ignore[arg-type]
    assert _dataworks_lane.run(*cols, 0, 1, 9, [], "t", 0, sink, ("i", "d", "u")) == (0, 0, 0)
    # a partition that is not an int: none taken (the records go one by one, as before)
    assert _debezium_lane.run(cols[0], [None], cols[1], 0, 1, 9, [], {}, None, "t", None, sink) == (
        0,
        0,
        0,
    )  # type: ignore[arg-type]
    assert _tencent_lane.run(*cols, 0, 1, 9, 3, None, "t", None, sink) == (0, 3)  # type: ignore[arg-type]


# -- Debezium ----------------------------------------------------------------------------------
def _field(column: str, typ: str, **more: Any) -> dict[str, Any]:
    return {"type": typ, "optional": True, "field": column, **more}


_DECIMAL = {"name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}
_DBZ_COLUMNS = {
    "plain": [_field("id", "int32"), _field("v", "string")],
    "numbered": [_field("id", "int32"), _field("v", "int64")],
    "typed": [
        _field("id", "int32"),
        _field("amount", "bytes", **_DECIMAL),
        _field("at", "int64", name="io.debezium.time.Timestamp"),
        _field("v", "string", default="x"),
    ],
}


def _envelope(before: str, after: str) -> dict[str, Any]:
    return {
        "type": "struct",
        "fields": [
            {"type": "struct", "fields": _DBZ_COLUMNS[before], "field": "before"},
            {"type": "struct", "fields": _DBZ_COLUMNS[after], "field": "after"},
            {"type": "struct", "fields": [], "field": "source"},
        ],
    }


_DBZ_SCHEMAS = [
    _envelope("plain", "plain"), _envelope("typed", "typed"), _envelope("plain", "typed"), None,
    _envelope("numbered", "plain"),
]  # fmt: skip
_DBZ_VALUES = st.one_of(
    st.integers(-3, 3), st.text(max_size=3), st.none(), st.just("AQI="), st.just("!"),
    st.just(1772445600000), st.booleans(), st.just(2**70),
)  # fmt: skip
_DBZ_IMAGES = (
    st.none()
    | st.just([])
    | st.fixed_dictionaries(
        {"id": st.integers(0, 3)}, optional={c: _DBZ_VALUES for c in ("v", "amount", "at", "w")}
    )
)
_SOURCES = st.fixed_dictionaries(
    {},
    optional={
        "db": st.sampled_from(["s", "", 5]),
        "table": st.sampled_from(["t", "k"]),
        "file": st.sampled_from(["mysql-bin.000002", ""]),
        "pos": st.sampled_from([4, 2**64, True]),
        "row": st.sampled_from([0, 1, "2"]),
        "gtid": st.sampled_from(["u:7", None]),
        "ts_ms": st.sampled_from([1, 0, "x"]),
        "ts_sec": st.sampled_from([2]),
        "snapshot": st.sampled_from(["true", "last", False, "false"]),
    },
)


def _dbz(
    schema: int,
    op: Any,
    source: Any,
    before: Any,
    after: Any,
    tx: Any = None,
    bare: bool = False,
    more: bool = False,
    compact: bool = True,
) -> bytes:
    """The message's JSON, compact as the converter writes it (the C read's), or with json's
    spaces (the Python read's)."""
    payload = {"op": op, "source": source, "before": before, "after": after, "transaction": tx}
    if op is None:
        del payload["op"]
    separators = (",", ":") if compact else None
    if bare:  # the JSON converter without schemas: the payload alone
        return json.dumps(payload, separators=separators).encode()
    envelope = {"schema": _DBZ_SCHEMAS[schema], "payload": payload, **({"x": 1} if more else {})}
    return json.dumps(envelope, separators=separators).encode()


_GOOD = {"id": st.integers(0, 3), "v": st.text(max_size=2), "amount": st.just("AQI="),
         "at": st.just(1772445600000)}  # fmt: skip
_SOURCE = {"db": "s", "table": "t", "file": "mysql-bin.000002", "pos": 4, "row": 0, "ts_ms": 1}


@st.composite
def _dbz_message(draw: st.DrawFn) -> bytes:
    """Mostly a row change the lane can take (a full image of its schema's columns, a source
    naming its table), and now and then one thing about it otherwise."""
    schema = draw(st.integers(0, len(_DBZ_SCHEMAS) - 1))
    images = []
    for which in ("before", "after"):
        envelope = _DBZ_SCHEMAS[schema]
        if envelope is None:
            images.append(draw(_DBZ_IMAGES))
            continue
        columns = envelope["fields"][which == "after"]["fields"]
        full = st.fixed_dictionaries({f["field"]: _GOOD[f["field"]] for f in columns})
        images.append(draw(full | _DBZ_IMAGES))
    source = draw(st.just(_SOURCE) | st.builds(dict, _SOURCES) | st.just(None) | st.just("s"))
    return _dbz(
        schema,
        draw(st.sampled_from(["c", "u", "d", "r"]) | st.sampled_from(["t", "x", None])),
        source,
        *images,
        draw(st.none() | st.fixed_dictionaries({"id": st.sampled_from(["t1"])}) | st.just(3)),
        draw(st.booleans().filter(lambda b: not b) | st.booleans()),
        draw(st.booleans().filter(lambda b: not b) | st.booleans()),
        draw(st.booleans()),
    )


_DBZ_MESSAGE = _dbz_message()
_DBZ_BAD = [  # schemas of another form: the lane cannot read them, the decoder quarantines
    b'{"schema":{"fields":5},"payload":{"op":"c"}}',
    b'{"schema":{"fields":[{"field":"after","fields":7}]},"payload":{"op":"c"}}',
]
_DBZ_RECORD = st.tuples(
    _DBZ_MESSAGE | st.sampled_from([None, b"", b"null", b" null ", b"{", b"[]", *_DBZ_BAD]),
    st.sampled_from([None, b'{"id": 1}', b'{"schema": {}, "payload": {"id": 1}}', b"{"]),
)


def _one(value: bytes) -> list[tuple[tuple[bytes | None, bytes | None], int, bool]]:
    return [((value, b'{"id": 1}'), 0, False)]


_ROW = {"id": 1, "v": "a"}
_DBZ_CTX = DecodeContext(primary_keys={"s.k": ["v", "id"]})
"""Table `k`'s key configured, unlike the record keys' (`{"id": ...}`): a record of table `t`
read with `k`'s key, or the other way round, shows."""


@settings(max_examples=examples(400), deadline=None)
@given(
    records=st.lists(st.tuples(_DBZ_RECORD, st.integers(0, 1), st.booleans()), max_size=30),
    run=st.sampled_from([1, 3, 50]),
    flush=st.sampled_from([2, 3, 20_000]),
)
@example(records=_one(_dbz(0, "c", _SOURCE, None, {"id": 1})), run=50, flush=20_000)  # partial
@example(records=_one(_dbz(4, "u", _SOURCE, {"id": 1, "v": 2}, _ROW)), run=50, flush=20_000)
@example(records=_one(_dbz(0, "c", _SOURCE, None, _ROW, more=True)), run=50, flush=20_000)
@example(records=_one(_dbz(0, "c", {**_SOURCE, "snapshot": "true"}, None, _ROW)), run=50,
         flush=20_000)  # fmt: skip
# the record loop's, a batch filled in it
@example(records=_one(_dbz(0, "c", _SOURCE, None, _ROW)) * 5, run=50, flush=2)
@example(  # NULL values and text beyond ASCII, through the record loop's image buffers
    records=[*_one(_dbz(0, "c", _SOURCE, None, {"id": 1, "v": None}))] * 2
    + [*_one(_dbz(0, "u", _SOURCE, {"id": 1, "v": "ü€😀"}, {"id": 1, "v": None}))] * 2,
    run=50, flush=20_000,
)  # fmt: skip
@example(records=[((v, None), 0, False) for v in _DBZ_BAD * 2], run=50, flush=20_000)
@example(  # tables with a key configured and without, and record keys of other names, in turn
    # (twice: the second time every shape is counted, so the record loop reads them all; a
    # shape of key `w` stops the loop, which goes on at a record of `k`)
    records=[((_dbz(0, "c", {**_SOURCE, "table": t}, None, _ROW), key), 0, False)
             for t, key in [("t", b'{"id":1}'), ("k", b'{"id":1}'), ("t", b'{"id":1}'),
                            ("t", b'{"v":1}'), ("t", None), ("k", b'{"v":1}'),
                            ("t", b'{"v":1,"id":1}')] * 2
             + [("t", b'{"w":1}'), ("k", b'{"id":1}'), ("t", b'{"id":1}'), ("t", b'{"w":1}'),
                ("t", b'{"v":1}'), ("t", b'{"id":1}')]],
    run=50, flush=20_000,
)  # fmt: skip
def test_the_debezium_lane_decodes_what_the_decoder_decodes(
    records: list[tuple[tuple[bytes | None, bytes | None], int, bool]], run: int, flush: int
) -> None:
    """Every output row, the lane on or off, its records fed one by one or as runs (`run`), in
    any stream: every op, envelopes with and without a schema, schemas whose before and after differ, full and partial images, values
    a column's type cannot read, sources that name no table or hold odd positions, record keys
    of every kind, tombstones, damage and carried records."""
    recs = [
        RawRecord("p.s.t", partition, offset, key, value, 0, carried=carried)
        for offset, ((value, key), partition, carried) in enumerate(records)
    ]
    recs.sort(key=lambda r: (r.partition, r.offset))
    fmt, ctx = "debezium_json", _DBZ_CTX
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stream, "_FLUSH_ROWS", flush)
        alone = _rows(recs, lanes=False, fmt=fmt, ctx=ctx)
        assert _rows(recs, lanes=True, fmt=fmt, ctx=ctx) == alone
        assert _rows(recs, lanes=True, fmt=fmt, ctx=ctx, run=run) == alone


def test_the_debezium_lane_takes_full_row_changes() -> None:
    """A create, an update and a delete with full images in a schema's envelope whose text the
    stream read before go by the lane, another table's message between them; a tombstone and a message without a schema go
    to the decoder. What the lane reads of a schema it reads once: one table's rows share
    their key, types and defaults."""
    full = {"id": 1, "amount": "AQI=", "at": 1772445600000, "v": "a"}
    source = {"db": "s", "table": "t", "file": "mysql-bin.000002", "pos": 4, "ts_ms": 1}
    values = [
        _dbz(1, "c", source, None, full),
        _dbz(0, "c", {**source, "table": "u"}, None, {"id": 2, "v": "b"}),
        _dbz(1, "u", source, full, {**full, "v": "b"}),
        _dbz(1, "d", source, {**full, "v": "b"}, None),
        None,
        _dbz(1, "c", source, None, full, bare=True),
    ]
    for value in values:  # each schema's text read before, as a stream's earlier records do
        if value:
            dbz_json._PARSE(value)
    driver = _StreamDriver("debezium_json", DecodeContext())
    for offset, value in enumerate(values):
        driver.feed(RawRecord("p.s.t", 0, offset, b'{"id": 1}', value, 0))
    driver.finish()
    assert driver.lane_rows.ops == ["insert", "insert", "update", "delete"]
    assert [e.offset for e in driver.sink.events] == [5]
    rows = [r for r in driver.lane_rows.rows if r[1] == "t"]
    assert len({(id(r[2]), id(r[3]), id(r[12])) for r in rows}) == 1
    assert rows[0][2] == ["id"] and rows[0][12] == {"v": "x"}
    assert driver.lane_rows.after.values[:4] == ["1", "2.58", "2026-03-02 10:00:00", "a"]


@pytest.mark.parametrize("in_place", [False, True])
def test_the_debezium_record_loop_takes_a_runs_row_changes(in_place: bool) -> None:
    """Fed as a run (`RawRun`), creates, updates and deletes go by the lane's record loop in C:
    Python's `take` sees only the first of each shape; a tombstone is counted by the loop."""
    taken: list[int] = []

    class Counting(DebeziumLane):
        def take(self, rec: RawRecord) -> int | None:
            taken.append(rec.offset)
            return super().take(rec)

    full = {"id": 1, "amount": "AQI=", "at": 1772445600000, "v": "a"}
    source = {"db": "s", "table": "t", "file": "mysql-bin.000002", "pos": 4, "ts_ms": 1}
    values = [
        *(_dbz(1, "c", {**source, "pos": p}, None, full) for p in (4, 5, 6)),  # 0-2
        _dbz(0, "c", {**source, "table": "u"}, None, {"id": 2, "v": "b"}),  # 3: a shape
        *(_dbz(1, "u", {**source, "pos": p}, full, {**full, "v": "b"}) for p in (7, 8)),
        None,  # 6: a tombstone
        *(_dbz(1, "d", {**source, "pos": p}, full, None) for p in (9, 10)),  # 7-8
    ]
    n = len(values)
    keys = [b'{"id":1}'] * n
    keys[2] = b'{"v":"a"}'  # another key: its own shape
    cols = [["p.s.t"] * n, [0] * n, list(range(n)), keys, values, [0] * n, [None] * n,
            [None] * n, [None] * n]  # fmt: skip
    for value in values:  # each schema's text read before, as a stream's earlier records do
        if value:
            dbz_json._PARSE(value)
    driver = _StreamDriver("debezium_json", DecodeContext())
    driver.lane_class = Counting
    if in_place:  # read from an Arrow array's buffers, between other partitions' rows
        cols[4] = _in_place(values)
    assert list(driver.feed_run(RawRun(cols))) == []
    driver.finish()
    assert taken == [0, 2, 3, 4, 7]  # the tombstone (6) counted by the loop
    assert driver.lane_rows.ops == ["insert"] * 4 + ["update"] * 2 + ["delete"] * 2
    rows = driver.lane_rows.rows
    assert [r[15] for r in rows] == [0, 1, 2, 3, 4, 5, 7, 8]
    assert [r[7] for r in rows if r[1] == "t"] == [4, 5, 6, 7, 8, 9, 10]
    assert [r[2] for r in rows] == [["id"], ["id"], ["v"], ["id"], ["id"], ["id"], ["id"], ["id"]]
    stats = {stat: n for (_, _, stat), n in driver.sink.stats.items()}
    assert stats["records_in"] == stats["records_consumed"] == n
    assert stats["tombstones"] == 1
    shapes = Counter[tuple[str, str]]()
    for key, counted in driver.lane_rows.shapes.items():
        shapes[key[1], key[2]] += counted[1]
    assert shapes == {("t", "insert"): 3, ("u", "insert"): 1, ("t", "update"): 2,
                      ("t", "delete"): 2}  # fmt: skip


# -- Tencent -----------------------------------------------------------------------------------
_TXNS = sample.workload(datetime(2026, 11, 20, tzinfo=UTC), 1, txns_per_hour=4, seed=3)
_WHOLE = [v for _, _, _, v in sample.encode_tencent(_TXNS, segment_bytes=10**6).records]
_SEGMENTS = [v for _, _, _, v in sample.encode_tencent(_TXNS[:2], segment_bytes=300).records]
_TENCENT_CTX = DecodeContext(
    tables={"shop.orders": TableConfig("shop.orders", ddl=sample.CREATE_SQL).table_def()}
)  # type: ignore[dict-item]


_NAMES = ("s", "t", "id")
"""An entry's (db, table, key column): `_entry`'s default; others of the same lengths tell
apart a read that reuses an earlier entry's column list by their sizes alone."""
_OTHER_NAMES = [("s", "u", "id"), ("r", "t", "id"), ("s", "t", "ix")]


def _entry(
    kind: str, seq: int, *, types: str = "int(11)", gtid: str = "u:9",
    names: tuple[str, str, str] = _NAMES,
) -> pb.Entry:  # fmt: skip
    db, table, column = names
    header = pb.Header(seqId=seq, schemaName=db, tableName=table, gtid=gtid, fileName="b.000001")
    cols = [pb.Column(name=column, originalType=types, isKey=True)]
    row = pb.RowChange(newColumns=[pb.Data(dataType=pb.INT32, sv=str(seq))])
    events = {
        "begin": pb.Event(beginEvent=pb.BeginEvent(transactionId="")),
        "commit": pb.Event(commitEvent=pb.CommitEvent(transactionId="x1")),
        "dml": pb.Event(dmlEvent=pb.DMLEvent(columns=cols, rows=[row, row])),
        "ddl": pb.Event(ddlEvent=pb.DDLEvent(sql="ALTER TABLE s.t ADD COLUMN w int")),
        "heartbeat": pb.Event(heartbeatEvent=pb.HeartbeatEvent()),
        "odd": pb.Event(dmlEvent=pb.DMLEvent(dmlEventType=9, columns=cols, rows=[row])),
        "na": pb.Event(
            dmlEvent=pb.DMLEvent(
                columns=cols, rows=[pb.RowChange(newColumns=[pb.Data(dataType=pb.NA)])]
            )
        ),  # fmt: skip
    }
    return pb.Entry(header=header, event=events[kind])


def _envelope(
    kinds: list[str], seq: int, total: int = 1, index: int = 0,
    names: list[tuple[str, str, str]] | None = None, **how: Any,
) -> bytes:  # fmt: skip
    """An Envelope of entries of `kinds` numbered from `seq` (`names`: each entry's, else
    `_NAMES`; `how`: `_entry`'s other options)."""
    names = names or [_NAMES] * len(kinds)
    items = [_entry(k, seq + i, names=names[i], **how) for i, k in enumerate(kinds)]
    data = pb.Entries(items=items).SerializeToString()
    return pb.Envelope(version=1, total=total, index=index, data=data).SerializeToString()


@st.composite
def _tencent_message(draw: st.DrawFn) -> bytes | None:
    """A message from the demo's workload (whole transactions, segments, checkpoints), or a
    transaction built of entries of every kind, or damage."""
    made = st.lists(
        st.sampled_from(["begin", "commit", "dml", "dml", "ddl", "heartbeat", "odd", "na"]),
        min_size=1,
        max_size=4,
    )
    kinds = draw(made | st.just(["begin", "dml", "commit"]) | st.just(["begin", "dml", "dml"]))
    seq = draw(st.integers(1, 6))
    types = draw(st.sampled_from(["int(11)", "int(11)", ""]))
    gtid = draw(st.sampled_from(["u:9", ""]))
    names = draw(st.lists(st.sampled_from([_NAMES, _NAMES, *_OTHER_NAMES]), min_size=len(kinds),
                          max_size=len(kinds)))  # fmt: skip
    built = _envelope(kinds, seq, types=types, gtid=gtid, names=names)
    return draw(
        st.sampled_from(_WHOLE)
        | st.sampled_from(_SEGMENTS)
        | st.just(built)
        | st.sampled_from([None, b"", b"\x08\x02", built[:-3]])
    )


@settings(max_examples=examples(300), deadline=None)
@given(
    records=st.lists(
        st.tuples(_tencent_message(), st.integers(0, 1), st.booleans(), st.integers(0, 2)),
        max_size=25,
    ),
    run=st.sampled_from([1, 3, 50]),
    flush=st.sampled_from([2, 3, 20_000]),
)
@example(records=[(v, 0, False, 0) for v in _WHOLE[:4]], run=50, flush=20_000)
@example(records=[(v, 0, False, 0) for v in _WHOLE[:4] * 2], run=50, flush=3)  # the loop's
@example(
    records=[(_envelope(["begin", "dml", "commit"], 1, gtid=""), 0, False, 0)], run=50,
    flush=20_000,
)  # fmt: skip
@example(
    records=[(_envelope(["begin", "commit", "dml", "commit"], 1), 0, False, 0)], run=50,
    flush=20_000,
)  # fmt: skip
@example(  # an Envelope's first segment holding whole Entries: the two are one group
    records=[(_envelope(["begin", "dml", "commit"], 1, total=2), 0, False, 0),
             (_envelope(["dml"], 4, total=2, index=1), 0, False, 0)], run=50, flush=20_000,
)  # fmt: skip
@example(  # entries of other tables or columns (names of the same sizes) in a message, and
    # in the messages after it: each is read with its own column list
    records=[
        (_envelope(["begin", "dml", "dml", "commit"], 1, names=[_NAMES, _NAMES, n, _NAMES]), 0,
         False, 0)
        for n in _OTHER_NAMES
    ] + [(_envelope(["begin", "dml", "commit"], 1, names=[_NAMES, n, _NAMES]), 1, False, 0)
         for n in [*_OTHER_NAMES, _NAMES]],
    run=50, flush=20_000,
)  # fmt: skip
def test_the_tencent_lane_decodes_what_the_decoder_decodes(
    records: list[tuple[bytes | None, int, bool, int]], run: int, flush: int
) -> None:
    """Every output row, the lane on or off, its records fed one by one or as runs (`run`), in
    any stream: whole transactions, transactions across messages and segments, DDL and control entries, entries numbered with gaps or
    backwards, rows of undeclared types or left-out columns, damage and carried records
    (`skip`: entries a carried record's first group had emitted)."""
    recs = [
        RawRecord("t", partition, offset, None, value, 0, carried=carried, skip=skip)
        for offset, (value, partition, carried, skip) in enumerate(records)
    ]
    recs.sort(key=lambda r: (r.partition, r.offset))
    fmt, ctx = "tencent_dts_pb", _TENCENT_CTX
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stream, "_FLUSH_ROWS", flush)
        alone = _rows(recs, False, fmt, ctx)
        assert _rows(recs, True, fmt, ctx) == alone
        assert _rows(recs, True, fmt, ctx, run=run) == alone


def test_the_tencent_lane_takes_whole_transactions() -> None:
    """A message holding one whole transaction goes by the lane; segments, a checkpoint and
    an entry numbered after a gap go to the decoder."""
    driver = _StreamDriver("tencent_dts_pb", _TENCENT_CTX)
    values = [*_WHOLE[:2], _SEGMENTS[0], _SEGMENTS[1]]
    for offset, value in enumerate(values):
        driver.feed(RawRecord("t", 0, offset, None, value, 0))
    driver.finish()
    txns = [t for t in _TXNS[:2]]
    assert len(driver.lane_rows) == sum(len(t.changes) for t in txns)
    assert {r[10] for r in driver.lane_rows.rows} == {t.gtid for t in txns}  # the txn id
    stats = {stat: n for (_, _, stat), n in driver.sink.stats.items()}
    assert stats["transactions_committed"] == 2


@pytest.mark.parametrize("in_place", [False, True])
def test_the_tencent_record_loop_takes_a_runs_whole_transactions(in_place: bool) -> None:
    """Fed as a run (`RawRun`), messages of whole transactions go by the lane's record loop in
    C: Python's `take` sees only those the lane does not take (checkpoints, segments: the
    decoder's) and those with a change of a shape not counted yet; the rows, counters and the
    decoder's state after the loop (its last seqId) are those of the records fed one by one."""
    taken: list[int] = []

    class Counting(TencentLane):
        def take(self, rec: RawRecord) -> int | None:
            taken.append(rec.offset)
            return super().take(rec)

    txns = sample.workload(datetime(2026, 11, 20, tzinfo=UTC), 1, txns_per_hour=16, seed=5)
    whole = [v for _, _, _, v in sample.encode_tencent(txns, segment_bytes=10**6).records]
    values = [*whole, *_SEGMENTS]
    n = len(values)
    cols = [["t"] * n, [0] * n, list(range(n)), [None] * n, values, [0] * n, [None] * n,
            [None] * n, [None] * n]  # fmt: skip
    driver = _StreamDriver("tencent_dts_pb", _TENCENT_CTX)
    driver.lane_class = Counting
    if in_place:  # read from an Arrow array's buffers, between other partitions' rows
        cols[4] = _in_place(values)
    assert list(driver.feed_run(RawRun(cols))) == []
    by_record = _StreamDriver("tencent_dts_pb", _TENCENT_CTX)
    for offset, value in enumerate(values):
        by_record.feed(RawRecord("t", 0, offset, None, value, 0))
    assert driver.dec is not None and by_record.dec is not None
    assert driver.dec.last_seq == by_record.dec.last_seq > 0
    driver.finish()
    by_record.finish()
    rows = driver.lane_rows
    firsts = {counted[0].offset for counted in rows.shapes.values()}
    by_lane = {r[15] for r in rows.rows}
    assert len(by_lane) >= 16 and set(taken) <= firsts | (set(range(n)) - by_lane)
    assert len(set(taken) & by_lane) <= 3  # the rest by C: a shape per op
    assert rows.rows == by_record.lane_rows.rows and rows.ops == by_record.lane_rows.ops
    assert driver.sink.stats == by_record.sink.stats
    assert driver.sink.events == by_record.sink.events


_FUZZ_TXNS = sample.workload(datetime(2026, 11, 20, tzinfo=UTC), 1, txns_per_hour=6, seed=9)
_FUZZ_VALID = {
    fmt: [r.value for r in sample.to_records(sample.ENCODERS[fmt](_FUZZ_TXNS), "t")]
    for fmt in ("dataworks_json", "debezium_json", "tencent_dts_pb")
}
_FUZZ_CTX = DecodeContext(
    tables={"shop.orders": TableConfig("shop.orders", ddl=sample.CREATE_SQL).table_def()}  # type: ignore[dict-item]
)
_MUTATION = st.tuples(
    st.integers(0, 10_000),  # which record (modulo the stream's length)
    st.sampled_from(["flip", "insert", "delete", "truncate", "repeat"]),
    st.integers(0, 100_000),  # where in it (modulo its length)
    st.integers(0, 255),
)


def mutated(
    values: list[bytes | None], mutations: list[tuple[int, str, int, int]]
) -> list[bytes | None]:
    """Valid messages with bytes flipped, inserted, deleted, cut short or a stretch repeated."""
    out = list(values)
    for which, op, at, byte in mutations:
        i = which % len(out)
        v = out[i]
        if v is None:  # a tombstone: nothing to damage
            continue
        k = at % (len(v) + 1)
        if op == "flip" and v:
            k %= len(v)
            v = v[:k] + bytes([v[k] ^ (byte or 1)]) + v[k + 1 :]
        elif op == "insert":
            v = v[:k] + bytes([byte]) + v[k:]
        elif op == "delete":
            v = v[:k] + v[k + 1 :]
        elif op == "truncate":
            v = v[:k]
        else:
            v = v[:k] + v[k : k + byte] * 2 + v[k + byte :]
        out[i] = v
    return out


@settings(max_examples=examples(120), deadline=None)
@given(mutations=st.lists(_MUTATION, min_size=1, max_size=6), run=st.sampled_from([0, 3, 64]))
@pytest.mark.parametrize("fmt", sorted(_FUZZ_VALID))
def test_mutated_messages_decode_the_same_with_the_c_reads_and_without(
    fmt: str, mutations: list[tuple[int, str, int, int]], run: int
) -> None:
    """Issue 79 item 10: a short fuzz of each C record loop, fed valid messages with random
    damage (the sanitizer build, `scripts/sanitize.sh`, runs it too): whatever the bytes, the
    output with the lanes' C reads equals the Python decoder's."""
    values = mutated(_FUZZ_VALID[fmt], mutations)
    recs = [RawRecord("t", 0, i, None, v, 0) for i, v in enumerate(values)]
    alone = _rows(recs, lanes=False, fmt=fmt, ctx=_FUZZ_CTX)
    assert _rows(recs, lanes=True, fmt=fmt, ctx=_FUZZ_CTX, run=run) == alone


@pytest.mark.parametrize("fmt", ["dataworks_json", "debezium_json"])
def test_a_message_gets_the_same_reason_whatever_the_schema_cache_holds(fmt: str) -> None:
    """Issue 79 item 9: bytes that are not UTF-8 after a schema seen before raised
    UnicodeDecodeError past the shared-member read (a "decoder error"), where a fresh cache
    gave orjson's "not valid UTF-8": one bad message, two reasons."""
    good = next(v for v in _FUZZ_VALID[fmt] if v)
    bad = good[: len(good) // 2] + b"\xf9" + good[len(good) // 2 :]

    def reason(values: list[bytes]) -> str:
        recs = [RawRecord("t", 0, i, None, v, 0) for i, v in enumerate(values)]
        rows = _rows(recs, lanes=False, fmt=fmt, ctx=_FUZZ_CTX)
        (q,) = [dict(eval(k)) for k in rows if "'quarantine'" in k]  # noqa: S307 - our repr
        return str(q["reason"])

    cold = reason([bad])
    warm = reason([good, bad])  # the schema's text now cached
    assert warm == cold and "decoder error" not in cold and "UTF-8" in cold


@pytest.mark.parametrize("fmt", sorted(_FUZZ_VALID))
def test_a_record_over_the_size_limit_is_quarantined_and_the_rest_decodes(fmt: str) -> None:
    """Issue 79 item 8: a record larger than `max_record_bytes` is quarantined unread with its
    bytes and the reason, with the lanes' C reads or without, fed one by one or as runs."""
    values = list(_FUZZ_VALID[fmt])
    sizes = sorted(len(v) for v in values if v)
    limit = sizes[len(sizes) // 2]  # about half the stream's records are over it
    ctx = DecodeContext(tables=_FUZZ_CTX.tables, max_record_bytes=limit)
    recs = [RawRecord("t", 0, i, None, v, 0) for i, v in enumerate(values)]
    alone = _rows(recs, lanes=False, fmt=fmt, ctx=ctx)
    assert _rows(recs, lanes=True, fmt=fmt, ctx=ctx) == alone
    assert _rows(recs, lanes=True, fmt=fmt, ctx=ctx, run=64) == alone
    rows = [dict(eval(k)) for k in alone if "'quarantine'" in k]  # noqa: S307 - our repr
    big = [r for r in rows if r["reason"].startswith("record too large")]
    assert {r["offset"] for r in big} == {i for i, v in enumerate(values) if v and len(v) > limit}
    assert all(r["raw_value"] == values[r["offset"]] for r in big)


@pytest.mark.parametrize("fmt", sorted(_FUZZ_VALID))
def test_output_batches_are_drained_by_bytes_too(fmt: str) -> None:
    """Issue 79 item 8: batches were drained every 20,000 rows only, and rows of big values
    filled an Arrow string column past its 2 GiB on every retry. With a small byte bound the
    output is cut into more batches, row for row the same."""
    values = _FUZZ_VALID[fmt] * 4
    recs = [RawRecord("t", 0, i, None, v, 0) for i, v in enumerate(values)]

    def batches(run: int) -> list[pa.RecordBatch]:
        copies = [RawRecord(**{f: getattr(r, f) for f in r.__dataclass_fields__}) for r in recs]
        fed = _runs(copies, run) if run else copies
        return list(decode_raw(iter(fed), fmt, _FUZZ_CTX, shapes=True))

    def rows(out: list[pa.RecordBatch]) -> Counter[str]:
        return Counter(
            repr(sorted(r.items())) for b in out for r in b.to_pylist() if r["kind"] != "shape"
        )

    whole = batches(64)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stream, "_FLUSH_BYTES", 3 * max(len(v or b"") for v in values))
        for run in (0, 64):
            cut = batches(run)
            assert len(cut) > len(whole) and rows(cut) == rows(whole)


_HUGE = b"9" * 5000  # beyond Python's int_max_str_digits (4300): json.loads refuses it


@pytest.mark.parametrize(
    "fmt,message,field",
    [
        ("debezium_json", _dbz(0, "c", _SOURCE, None, _ROW), b'"pos":4'),
        ("debezium_json", _dbz(0, "c", _SOURCE, None, _ROW), b'"ts_ms":1'),
        ("debezium_json", _dbz(0, "c", _SOURCE, None, _ROW), b'"row":0'),
        ("debezium_json", _dbz(0, "c", _SOURCE, None, _ROW), b'"after":{"id":1'),
        ("dataworks_json", _INSERTS[0], b'"eventTime":1'),
        ("dataworks_json", _INSERTS[0], b'"id":7'),
        ("dataworks_json", _INSERTS[0], b'"sequenceId":"7"'),
    ],
)
def test_an_integer_of_more_digits_than_python_reads_decodes_alike_with_lanes_on_and_off(
    fmt: str, message: bytes, field: bytes
) -> None:
    name = field.rsplit(b":", 1)[0]
    value = message.replace(field, name + b":" + _HUGE)
    assert value != message
    recs = [RawRecord("p.s.t", 0, i, b'{"id": 1}', value, 0) for i in range(3)]
    ctx = _DBZ_CTX if fmt == "debezium_json" else None
    alone = _rows(recs, lanes=False, fmt=fmt, ctx=ctx)
    assert any("quarantine" in r for r in alone)  # (Python's read refuses it)
    assert _rows(recs, lanes=True, fmt=fmt, ctx=ctx) == alone
    assert _rows(recs, lanes=True, fmt=fmt, ctx=ctx, run=50) == alone
