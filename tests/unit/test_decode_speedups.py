"""The decoders' fast paths give what the plain ones give: the JSON reader that shares a
repeated member (`SharedMemberJson`) against `orjson.loads`, and the map and list columns built
once per shared object against the column built row by row (hypothesis)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recon.core.model import RawRecord
from recon.decode.base import DecodeContext, PerObject, SharedMemberJson
from recon.decode.lane import LaneImage
from recon.decode.stream import (
    _flat_nested_array,
    _image_array,
    _names_array,
    _nested_array,
    decode_records,
)
from tests.support.examples import examples

# JSON values orjson reads exactly: integers within 64 bits (orjson makes a longer one a float)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)
_MESSAGES = st.dictionaries(
    st.sampled_from(["schema", "payload", "op", "x"]) | st.text(max_size=4), _JSON, max_size=4
)


@settings(max_examples=examples(300), deadline=None)
@given(msg=_MESSAGES | _JSON, spaced=st.booleans())
def test_shared_member_json_reads_what_orjson_reads(msg: Any, spaced: bool) -> None:
    """Any JSON value (an object or not, as compact or spaced text) reads as orjson reads it,
    twice in a row: the second read shares the first one's `schema` object."""
    text = json.dumps(msg, ensure_ascii=False).encode() if spaced else orjson.dumps(msg)
    read = SharedMemberJson("schema")
    first, second = read(text), read(text)
    assert first == second == orjson.loads(text)


@given(schema=st.dictionaries(st.text(max_size=5), _JSON, min_size=1, max_size=4), n=_JSON)
def test_messages_that_repeat_the_member_share_one_object(schema: Any, n: Any) -> None:
    """The member is parsed once per distinct text: messages that repeat it share the object;
    another text of it is another object."""
    read = SharedMemberJson("schema")
    one, two = (read(orjson.dumps({"schema": schema, "payload": {"n": n, "i": i}})) for i in (1, 2))
    assert one["schema"] is two["schema"] and one["schema"] == schema
    assert (one["payload"], two["payload"]) == ({"n": n, "i": 1}, {"n": n, "i": 2})
    other = read(orjson.dumps({"schema": {**schema, "more": 1}, "payload": None}))
    assert other["schema"] is not one["schema"]


def _read_or_error(read: Any, text: bytes) -> object:
    """What `read` gives for `text`: its value, or orjson's error message."""
    try:
        return read(text)
    except orjson.JSONDecodeError as err:
        return str(err)


@pytest.mark.parametrize(
    "text",
    [b"{", b'{"a":1,}', b"[1,2]", b"NaN", b'{"a":1e400}', b'{"a":"\\ud800"}', b"\xef\xbb\xbf{}",
     b'{"a":1}x', b'"\xff"', b"[" * 2000 + b"]" * 2000],
)  # fmt: skip
def test_shared_member_json_fails_or_reads_as_orjson_does(text: bytes) -> None:
    """What msgspec refuses is read by orjson: the same value, or the same error."""
    assert _read_or_error(SharedMemberJson("schema"), text) == _read_or_error(orjson.loads, text)


@settings(max_examples=examples(300), deadline=None)
@given(schema=_JSON, others=_MESSAGES, spaced=st.booleans())
def test_a_message_opening_with_a_member_seen_reads_what_orjson_reads(
    schema: Any, others: Any, spaced: bool
) -> None:
    """After a message whose `schema` text it has seen (the opening it then reads past), any
    message opening with that text reads as orjson reads it, and shares the object."""
    read = SharedMemberJson("schema")
    seen = orjson.dumps({"schema": schema, "payload": 1})
    read(seen)
    rest = {k: v for k, v in others.items() if k != "schema"}
    text = orjson.dumps({"schema": schema, **rest})
    if spaced and rest:  # the members after it written with spaces
        text = b'{"schema":' + orjson.dumps(schema) + b"," + json.dumps(rest)[1:].encode()
    got = read(text)
    assert got == orjson.loads(text)
    if rest and not spaced:
        assert got["schema"] is read(seen)["schema"]


@pytest.mark.parametrize(
    "tail",
    [b"}", b" }", b'"schema":2}', b'"p":1}x', b'"p":1,}', b'"p":1', b' "p" : 1 }', b'"p":[1}',
     b'"schema":{},"p":1}'],
)  # fmt: skip
def test_what_follows_a_member_seen_fails_or_reads_as_orjson_does(tail: bytes) -> None:
    """The members after the opening read past are one object with it: nothing (a trailing
    comma), the member again, trailing text or a broken value read as orjson reads them."""
    read = SharedMemberJson("schema")
    read(b'{"schema":{"a":[1,2]},"p":0}')
    text = b'{"schema":{"a":[1,2]},' + tail
    assert _read_or_error(read, text) == _read_or_error(orjson.loads, text)


def test_shared_member_json_keeps_integers_beyond_64_bits_exact() -> None:
    """orjson reads an integer beyond 64 bits as a float (its digits lost); the reader keeps
    it, so a Debezium value of 25 digits decodes to its 25 digits."""
    big = 1234567890123456789012345
    assert SharedMemberJson("schema")(b'{"payload":{"v":%d}}' % big) == {"payload": {"v": big}}
    msg = {"before": None, "after": {"id": 1, "n": big}, "op": "c",
           "source": {"db": "shop", "table": "t", "ts_ms": 1}}  # fmt: skip
    rec = RawRecord("db1.shop.t", 0, 0, None, json.dumps(msg).encode(), 0)
    (event,) = [
        e for e in decode_records([rec], "debezium_json").to_pylist() if e["kind"] == "event"
    ]
    assert dict(event["after"])["n"] == str(big)


def test_per_object_derives_once_per_object_not_per_equal_value() -> None:
    seen: list[object] = []
    derive = PerObject(lambda o: seen.append(o) or len(seen))
    a, b = {"k": 1}, {"k": 1}
    assert [derive(a), derive(a), derive(b), derive(a)] == [1, 1, 2, 1]
    small = PerObject(lambda o: id(o), limit=2)
    objs = [[i] for i in range(5)]
    assert [small(o) for o in objs] == [id(o) for o in objs]  # bounded: cleared, still right
    assert len(small.known) <= 2


_MAP = pa.map_(pa.string(), pa.string())
_LIST = pa.list_(pa.string())
_DICTS = st.dictionaries(st.text(max_size=3), st.none() | st.text(max_size=3), max_size=4)


@settings(max_examples=examples(200), deadline=None)
@given(
    shared=st.lists(st.none() | _DICTS, min_size=1, max_size=4),
    rows=st.lists(st.integers(0, 3), max_size=80),
    own=st.lists(st.tuples(st.integers(0, 80), _DICTS), max_size=30),
)
def test_map_and_list_columns_of_shared_objects_equal_the_row_by_row_column(
    shared: list[Any], rows: list[int], own: list[tuple[int, dict[str, Any]]]
) -> None:
    """Rows that repeat a few shared objects (built once, then taken by index: most rows
    repeat one; every row one object: counted apart) and rows of their own (built row by row:
    most rows have their own) give the column pyarrow builds from the rows themselves, maps
    and lists alike, with NULL rows or without."""
    values = [shared[i % len(shared)] for i in rows]
    for at, d in own:
        values.insert(at, d)
    as_lists = {id(v): None if v is None else list(v) for v in values}  # shared stays shared
    lists = [as_lists[id(v)] for v in values]
    for column, typ in ((values, _MAP), (lists, _LIST)):
        row_by_row = pa.array(column, typ)
        assert _nested_array(column, typ).equals(row_by_row)
        assert _flat_nested_array(column, typ).equals(row_by_row)


_NAMES = st.lists(st.text(max_size=3), max_size=4).map(tuple)


@settings(max_examples=examples(300), deadline=None)
@given(
    shared=st.lists(_NAMES, min_size=1, max_size=4),
    rows=st.lists(st.integers(0, 3) | st.none(), max_size=80),
    own=st.lists(st.tuples(st.integers(0, 80), _NAMES | st.none()), max_size=30),
)
def test_an_image_column_of_shared_names_equals_the_row_by_row_column(
    shared: list[tuple[str, ...]],
    rows: list[int | None],
    own: list[tuple[int, tuple[str, ...] | None]],
) -> None:
    """The lanes' image columns (`LaneImage`): rows whose names are one of a few shared tuples
    (their names built once, then taken by index), one tuple every row, tuples of their own
    (built row by row), empty ones and rows without an image give the map column pyarrow
    builds from the rows themselves; and the names alone, their names one after another."""
    images: list[tuple[tuple[str, ...], list[str | None]] | None] = []
    for i in rows:
        names = None if i is None else shared[i % len(shared)]
        images.append(None if names is None else (names, [f"{n}!" for n in names]))
    for at, names in own:  # a tuple of its own, as a Python read gives it (an equal one too)
        images.insert(at, None if names is None else (tuple(list(names)), ["v"] * len(names)))
    column = LaneImage()
    for image in images:
        column.add(image)
    expected = [None if im is None else list(zip(*im, strict=True)) for im in images]
    assert _image_array(column, _MAP).to_pylist() == expected
    flat = [n for names in column.names for n in names]
    assert _names_array(column.names, pa.string()).to_pylist() == flat
    one = [shared[0]] * len(rows)  # every row the one tuple
    assert _names_array(one, pa.string()).to_pylist() == [n for t in one for n in t]


def test_an_image_column_of_a_few_shared_names_takes_each_rows_own() -> None:
    """Two tables' rows taking turns, and a row of its own among them: each row's own names
    in its place (the few shared tuples' names taken by index)."""
    a, b, c = ("id", "name", "amt"), ("k",), ("id", "x")
    rows = [a, b, a, a, b, tuple(list(c)), a, b, a, b, a, a]
    got = _names_array(rows, pa.string()).to_pylist()
    assert got == [n for t in rows for n in t]


@pytest.mark.parametrize("one", [None, {}, {"a": "1", "b": None}])
def test_a_column_whose_rows_all_hold_one_object_is_that_object_repeated(one: Any) -> None:
    """Every row one object (a one-table batch's key columns and types): its value in every
    row; an equal object of another order is its own value, not the first's."""
    column = [one] * 5
    assert (
        _nested_array(column, _MAP).to_pylist() == [None if one is None else list(one.items())] * 5
    )
    if one:
        reordered = dict(reversed(one.items()))
        got = _nested_array([one, reordered, one], _MAP).to_pylist()
        assert got == [list(one.items()), list(reordered.items()), list(one.items())]


@settings(max_examples=examples(300), deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.integers(0, 2),  # which value the batch's rows hold
            st.integers(1, 6),  # how many rows
            st.sampled_from(["keep", "change in place", "reorder in place", "mix"]),
        ),
        max_size=8,
    ),
    values=st.lists(_DICTS, min_size=3, max_size=3),
)
def test_a_column_kept_from_batch_to_batch_is_each_batchs_own(
    batches: list[tuple[int, int, str]], values: list[dict[str, Any]]
) -> None:
    """Batches after batches built with one `repeated` (a decode task's, kept from batch to
    batch: a column whose rows all held one value is sliced for the next batch holding it):
    each batch's column is the one pyarrow builds from its rows, whatever the batches before
    held, however many rows they had, and whether their value was changed or reordered in
    place since (maps, and the same values as lists and tuples)."""
    repeated: dict[str, Any] = {}
    for which, n, how in batches:
        value = values[which]
        if how == "change in place":
            value["z"] = str(n)
        elif how == "reorder in place":
            items = list(value.items())
            value.clear()
            value.update(reversed(items))
        rows = [value] * n
        if how == "mix":
            rows[n // 2] = values[(which + 1) % 3]
        for column, typ, name in (
            (rows, _MAP, "m"),
            ([list(v) for v in rows], _LIST, "l"),
            ([tuple(v) for v in rows], _LIST, "t"),
        ):
            assert _nested_array(column, typ, repeated, name).equals(pa.array(column, typ))


def _dataworks(seq: int, op: str, before: Any, after: Any, schema: dict[str, Any]) -> bytes:
    image = lambda cols: None if cols is None else {"dataColumn": cols}  # noqa: E731
    payload = {"op": op, "sequenceId": str(seq), "before": image(before), "after": image(after)}
    return orjson.dumps({"schema": schema, "payload": payload})


def test_dataworks_messages_sharing_a_schema_decode_as_each_read_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The DataWorks decoder reads each distinct `schema` once and derives its column types
    and key once per shared object: the events equal those of reading every message with
    `orjson.loads`, also where one message adds a column its schema does not declare (the
    shared types must not take it), where a schema names no key (the configured key), and
    where a value does not fit 64 bits (exact now: orjson made it a float)."""
    from recon.decode.formats.dataworks_json import DataworksJsonDecoder

    cols = [{"name": "id", "type": "LONG"}, {"name": "v", "type": "STRING"}]
    keyed = {"dataColumn": cols, "primaryKey": ["id"], "source": {"dbName": "d", "tableName": "t"}}
    keyless = {"dataColumn": cols, "source": {"dbName": "d", "tableName": "u"}}
    values = [
        _dataworks(1, "INSERT", None, {"id": 1, "v": "a"}, keyed),
        _dataworks(2, "INSERT", None, {"id": 2, "v": "b", "extra": 7}, keyed),  # undeclared
        _dataworks(3, "UPDATE_BEFOR", {"id": 1, "v": "a"}, None, keyed),
        _dataworks(3, "UPDATE_AFTER", None, {"id": 1, "v": "c"}, keyed),
        _dataworks(4, "INSERT", None, {"id": 3, "v": None}, keyed),  # after the extra: shared
        _dataworks(5, "INSERT", None, {"id": 9, "v": "k"}, keyless),  # the configured key
        _dataworks(6, "DELETE", {"id": 2, "v": "b"}, None, keyed),
        b'{"schema": {"dataColumn": 5}, "payload": {"op": "INSERT"}}',  # a bad schema
    ]
    records = [RawRecord("t", 0, i, None, v) for i, v in enumerate(values)]
    ctx = DecodeContext(primary_keys={"d.u": ["id"]})
    shared = decode_records(records, "dataworks_json", ctx)
    big = values[0].replace(b'"id":1,', b'"id":' + b"9" * 30 + b",")
    exact = decode_records([RawRecord("t", 0, 0, None, big)], "dataworks_json", ctx)
    assert dict(exact["after"][0].as_py())["id"] == "9" * 30
    monkeypatch.setattr(DataworksJsonDecoder, "parse", lambda self, v: orjson.loads(v))
    alone = decode_records(records, "dataworks_json", ctx)
    # the same rows (their order differs: the lane's rows and the decoder's are batched apart)
    assert sorted(map(repr, shared.to_pylist())) == sorted(map(repr, alone.to_pylist()))
    events = shared.filter(pa.compute.equal(shared["kind"], "event")).sort_by("offset").to_pylist()
    assert [dict(e["types"]) for e in events][:2] == [
        {"id": "int64", "v": "string"},
        {"id": "int64", "v": "string", "extra": "int64"},
    ]
    assert dict(events[3]["types"]) == {"id": "int64", "v": "string"}
    assert [e["pk"] for e in events] == [["id"]] * len(events)
    assert shared.filter(pa.compute.equal(shared["kind"], "quarantine")).num_rows == 1


def test_decoding_collects_garbage_less_often_and_restores_the_collector() -> None:
    """While a stream decodes, the youngest generation is collected after 50k allocations
    instead of 700 (the kept events made each collection scan them again), and the objects
    alive before are frozen out of the scans; after the stream, or when its reader stops
    early, the collector is as it was."""
    import gc

    from recon.decode.stream import _FLUSH_ROWS, decode_raw

    before = gc.get_threshold()
    seen: list[tuple[tuple[int, ...], int]] = []
    insert = _dataworks(1, "INSERT", None, {"id": 1}, {"primaryKey": ["id"]})

    def records(n: int) -> Any:
        for i in range(n):
            if i < 2:  # the freeze count walks every frozen object: sampled, not per record
                seen.append((gc.get_threshold(), gc.get_freeze_count()))
            yield RawRecord("t", 0, i, None, insert)

    out = list(decode_raw(records(3), "dataworks_json", DecodeContext()))
    assert out and len(seen) == 2
    assert all(t[0] >= 50_000 and t[1:] == before[1:] and frozen > 0 for t, frozen in seen)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0

    stream = decode_raw(records(_FLUSH_ROWS + 1), "dataworks_json", DecodeContext())
    assert next(stream).num_rows == _FLUSH_ROWS  # the first flush: the reader stops there
    assert gc.get_threshold()[0] >= 50_000
    stream.close()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


_TXN_IDS = st.sampled_from([None, "", "a", "b"])
_ITEM = st.one_of(
    st.tuples(st.sampled_from(["begin", "commit"]), _TXN_IDS),
    st.tuples(st.just("event"), _TXN_IDS),
    st.tuples(st.just("control"), st.just("heartbeats")),
)
_EVENTS = st.lists(st.tuples(st.just("event"), _TXN_IDS), max_size=3)
_WHOLE = st.tuples(_TXN_IDS, _EVENTS, _TXN_IDS).map(
    lambda t: [("begin", t[0]), *t[1], ("commit", t[2])]
)
_ITEMS = (
    st.lists(_ITEM, max_size=5) | _WHOLE | st.tuples(_WHOLE, _ITEM).map(lambda t: t[0] + [t[1]])
)
_GROUPS = st.lists(
    st.tuples(st.integers(1, 3), st.booleans(), st.integers(0, 2), _ITEMS), max_size=6
)


def _assemble(groups: list[Any], fast: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Feed `groups` (records, carried, skip of the first, items) to a `TxnAssembler` as a
    decoder does: the records before a group's last were held (segments); after each feed,
    the records it used up, as the stream driver counts them. Returns everything it left."""
    from recon.core.model import Event
    from recon.decode.base import Sink, TxnAssembler, _rid

    if not fast:
        monkeypatch.setattr(TxnAssembler, "_whole_transaction", lambda *a: False)
    sink = Sink()
    txn = TxnAssembler(sink)
    offset, used, records = 0, [], []
    for n, carried, skip, items in groups:
        group = [RawRecord("t", 0, offset + i, None, b"", carried=carried) for i in range(n)]
        group[0].skip = skip
        offset += n
        records += group
        for r in group[:-1]:
            sink.hold(r)
        made = [
            (k, Event("d", "t", "insert", txn_id=p, offset=i) if k == "event" else p)
            for i, (k, p) in enumerate(items)
        ]
        txn.run_items(group, made)
        fed = _rid(group[-1])
        done = set(sink.released) - sink.quarantined
        if fed not in sink.held and fed not in sink.quarantined:
            done.add(fed)
        used.append(sorted(done))
        sink.released.clear()
    carry = [r.offset for r in txn.finish()]
    return (
        [(e.offset, e.txn_id) for e in sink.events], dict(sink.stats), sorted(sink.held),
        [(r.offset, reason) for r, reason, _ in sink.quarantine], used, carry,
        [r.skip for r in records],
    )  # fmt: skip


@settings(max_examples=examples(300), deadline=None)
@given(groups=_GROUPS)
def test_a_whole_transaction_in_one_group_is_applied_as_item_by_item(groups: Any) -> None:
    """`TxnAssembler` applies a group holding one whole transaction (BEGIN, events, COMMIT,
    none open before) at once: the events (and their transaction ids), counters, records held,
    used up, quarantined and carried, and the records' skips are those of feeding its items
    one by one, for any run of groups (carried ones, open transactions, stray commits)."""
    with pytest.MonkeyPatch.context() as mp:
        fast = _assemble(groups, True, mp)
    with pytest.MonkeyPatch.context() as mp:
        slow = _assemble(groups, False, mp)
    assert fast == slow
