"""Random and truncated bytes never crash a decoder: every bad record is quarantined with its
original bytes and a reason, and the records after it still decode."""

from __future__ import annotations

import dataclasses
import json
import operator
from collections import Counter
from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from recon.config import TableConfig
from recon.core.model import RawRecord
from recon.decode.base import DecodeContext
from recon.decode.stream import decode_records
from recon.demo import sample
from recon.formats import FORMATS
from tests.support.examples import examples

TXNS = sample.workload(datetime(2026, 11, 20, tzinfo=UTC), 1, txns_per_hour=3, seed=5)
CTX = DecodeContext(
    tables={"shop.orders": TableConfig("shop.orders", ddl=sample.CREATE_SQL).table_def()}
)  # type: ignore[dict-item]
VALID = {
    fmt: [r.value for r in sample.to_records(enc(TXNS), "t")]
    for fmt, enc in sample.ENCODERS.items()
}


def _decode(values: list[bytes | None], fmt: str) -> list[dict]:
    recs = [RawRecord("t", 0, i, None, v, 0) for i, v in enumerate(values)]
    return decode_records(recs, fmt, CTX).to_pylist()


CONTROL = {
    "tombstones",
    "heartbeats",
    "checkpoints",
    "rollbacks",
    "transaction_markers",
    "empty_envelopes",
    "empty_packets",
}


def _accounted(out: list[dict], n: int) -> None:
    """Every garbage record fed is quarantined, counted as control, carried, or yields events."""
    stats = {r["stat"]: r["n"] for r in out if r["kind"] == "stat"}
    assert stats.get("records_in", 0) == n
    control = sum(v for k, v in stats.items() if k in CONTROL or k.startswith("non_dml_"))
    with_events = {r["offset"] for r in out if r["kind"] == "event"}
    quarantined = {r["offset"] for r in out if r["kind"] == "quarantine"}
    carried = {r["offset"] for r in out if r["kind"] == "carry"}
    for q in out:
        if q["kind"] == "quarantine":
            assert q["reason"]
    assert len(quarantined | with_events | carried) + control >= n


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=examples(60), deadline=None)
@given(garbage=st.lists(st.binary(max_size=200), min_size=1, max_size=5))
def test_random_bytes_are_quarantined_not_crashing(fmt: str, garbage: list[bytes]) -> None:
    out = _decode(list(garbage), fmt)
    _accounted(out, len(garbage))
    quarantined = {r["offset"]: r["raw_value"] for r in out if r["kind"] == "quarantine"}
    for off, raw in quarantined.items():
        assert raw == garbage[off]


def _txn_ranges(fmt: str) -> list[range]:
    """Offsets of each transaction's records (the encoders emit one transaction after another)."""
    enc = sample.ENCODERS[fmt]
    bounds = [len(enc(TXNS[:k]).records) for k in range(len(TXNS) + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]


def _key(e: dict, without: tuple[str, ...] = ()) -> str:
    return repr(sorted((k, v) for k, v in e.items() if k != "kind" and k not in without))


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_truncated_records_are_quarantined_and_the_rest_decodes(
    fmt: str, data: st.DataObject
) -> None:
    values = VALID[fmt]
    i = data.draw(st.integers(0, len(values) - 1), label="record to truncate")
    v = values[i] or b""
    cut = data.draw(st.integers(0, max(0, len(v) - 1)), label="cut at")
    broken = list(values)
    broken[i] = v[:cut]
    out = _decode(broken, fmt)
    assert sum(r["n"] for r in out if r["kind"] == "stat" and r["stat"] == "records_in") == len(
        values
    )
    if broken[i] != values[i]:
        assert any(
            q["raw_value"] == broken[i] for q in out if q["kind"] == "quarantine"
        ) or fmt in (
            "tencent_dts_pb",
            "canal_pb",
        )  # a protobuf cut at a field boundary can still parse
    got = {_key(e) for e in out if e["kind"] == "event"}
    damaged = next(r for r in _txn_ranges(fmt) if i in r)
    # the damage stays inside its own transaction: everything else decodes as before, and
    # nothing is invented
    untouched = {
        _key(e) for e in _decode(values, fmt) if e["kind"] == "event" and e["offset"] not in damaged
    }
    assert untouched <= got
    # ... and the damaged transaction yields no change the source did not make (an event may
    # lose its transaction id or before image when the record carrying it was cut)
    loose = ("txn_id", "before")
    clean_loose = {_key(e, loose) for e in _decode(values, fmt) if e["kind"] == "event"}
    assert {_key(e, loose) for e in out if e["kind"] == "event"} <= clean_loose


def test_valid_but_empty_messages_are_counted() -> None:
    from recon._proto import canal_packet_pb2 as cp
    from recon._proto import tencent_subscribe_pb2 as pb

    for fmt, value in (
        ("tencent_dts_pb", pb.Envelope(version=1, total=1).SerializeToString()),
        ("canal_pb", cp.Packet(type=cp.MESSAGES).SerializeToString()),
    ):
        _accounted(_decode([value], fmt), 1)


def test_garbage_in_a_valid_stream_is_quarantined_with_its_bytes() -> None:
    for fmt in FORMATS:
        values: list[bytes | None] = list(VALID[fmt])
        values.insert(len(values) // 2, b"\xff\x00 definitely not a CDC message")
        out = _decode(values, fmt)
        q = [r for r in out if r["kind"] == "quarantine"]
        assert [r["raw_value"] for r in q] == [b"\xff\x00 definitely not a CDC message"], fmt
        clean = [r for r in _decode(VALID[fmt], fmt) if r["kind"] == "event"]
        events = [r for r in out if r["kind"] == "event"]
        assert len(events) == len(clean), fmt


_BEYOND_I64 = (1 << 63) + 1  # fits the wire (JSON, protobuf uint64), not a 64-bit column
_BEYOND_TS = (1 << 64) - 100  # a time whose milliseconds (x1000 where sent in seconds) do not fit


@pytest.mark.parametrize(
    ("fmt", "pos", "ts"),
    [
        ("tencent_dts_pb", _BEYOND_I64, None),  # header position is uint64
        ("debezium_json", _BEYOND_I64, None),  # source.pos
        ("debezium_json", None, _BEYOND_TS),  # source.ts_ms
        ("dataworks_json", None, _BEYOND_TS),  # eventTime
        ("canal_json", None, _BEYOND_TS),  # es
        ("tdsql_json", None, _BEYOND_TS),  # begintime (seconds)
    ],
)
def test_numbers_beyond_64_bits_quarantine_their_records_not_the_task(
    fmt: str, pos: int | None, ts: int | None
) -> None:
    """A hostile producer's position or time beyond int64 used to fail the whole decode task
    when the event batch was built (OverflowError); canal_pb's are int64 on the wire."""
    bad = dataclasses.replace(TXNS[1], pos=pos or TXNS[1].pos, ts_ms=ts or TXNS[1].ts_ms)
    enc = sample.ENCODERS[fmt]
    values = [r.value for r in sample.to_records(enc([TXNS[0], bad, TXNS[2]]), "t")]
    out = _decode(values, fmt)
    stats = {r["stat"]: r["n"] for r in out if r["kind"] == "stat"}
    assert stats["records_in"] == len(values)
    assert stats["records_in"] == stats["records_consumed"] + stats["records_quarantined"]
    q = [r for r in out if r["kind"] == "quarantine"]
    assert q, fmt
    assert all("beyond the signed 64-bit range" in r["reason"] for r in q), q[0]["reason"]
    assert {r["raw_value"] for r in q} <= set(values)
    # the transactions around it decode in full (offsets, and so order keys, differ)
    good = [r.value for r in sample.to_records(enc([TXNS[0], TXNS[2]]), "t")]
    rows = operator.itemgetter("op", "before", "after")
    clean = [rows(e) for e in _decode(good, fmt) if e["kind"] == "event"]
    assert clean
    assert [rows(e) for e in out if e["kind"] == "event"] == clean


_SPACE = st.sampled_from([b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c", b"\x85", b"\xa0", b"\x00"])
_PADDED = st.builds(
    lambda left, core, right: b"".join(left) + core + b"".join(right),
    st.lists(_SPACE, max_size=3),
    st.sampled_from([b"", b"null", b"nul", b"nullx", b"n", b"{}", b"Null"]),
    st.lists(_SPACE, max_size=3),
)


@settings(max_examples=examples(150), deadline=None)
@given(value=_PADDED)
@example(value=b"\x0bnull").via("a vertical tab before null")
@example(value=b"\x0c null\r").via("a form feed before null")
@example(value=b"\x85null").via("NEL, not ASCII whitespace")
@pytest.mark.parametrize("fmt", ["tdsql_json", "canal_json", "debezium_json", "dataworks_json"])
def test_blank_values_and_padded_nulls_are_read_as_stripping_them_reads_them(
    fmt: str, value: bytes
) -> None:
    """A value that is empty once its ASCII whitespace is stripped is quarantined as an empty
    value, in every JSON format; a Debezium value that is `null` once stripped is a tombstone.
    Other bytes around them (NUL, Latin-1 spaces) are not whitespace: the value is read as JSON
    (and quarantined when it is not)."""
    out = _decode([value], fmt)
    stats = {r["stat"]: r["n"] for r in out if r["kind"] == "stat"}
    reasons = [r["reason"] for r in out if r["kind"] == "quarantine"]
    tombstone = fmt == "debezium_json" and value.strip() == b"null"
    assert stats.get("tombstones", 0) == int(tombstone)
    empty = [r for r in reasons if r.startswith("empty value")]
    assert len(empty) == int(not value.strip())


_DEBEZIUM_MORE = [
    {
        "op": "c",
        "after": {"id": 1},
        "source": {"db": "s", "table": "t"},
        "transaction": {"id": "x"},
    },
    {"ddl": "CREATE TABLE t (id int)", "databaseName": "s", "position": {"file": "b.1", "pos": 4}},
]
_CONFUSED = [5, "x", True, None, [1], {"a": 1}, 2**70, 1.5]


def _leaves(msg: object, path: tuple = ()) -> list[tuple]:
    """The path of every value in a parsed JSON message (its own included)."""
    found = [path]
    items = (
        msg.items() if isinstance(msg, dict) else enumerate(msg) if isinstance(msg, list) else ()
    )
    for k, v in items:
        found += _leaves(v, (*path, k))
    return found


def _with(msg: object, path: tuple, value: object) -> object:
    if not path:
        return value
    copy = json.loads(json.dumps(msg))
    at = copy
    for k in path[:-1]:
        at = at[k]
    at[path[-1]] = value
    return copy


@pytest.mark.parametrize("fmt", ["dataworks_json", "debezium_json", "canal_json", "tdsql_json"])
def test_a_field_of_the_wrong_type_quarantines_its_record_not_the_task(fmt: str) -> None:
    """Any field of a valid message (the demo's, a Debezium transaction and DDL) given a value
    of another JSON type (a number, text, a boolean, null, a list, an object, an integer beyond
    64 bits, a float): the message decodes or is quarantined, and the decode task's batches
    build (a string column given a number failed the whole task: Canal's `gtid` and
    `pkNames`, DataWorks' `primaryKey`, Debezium's `source.gtid`, `transaction.id` and
    `databaseName`)."""
    messages = [json.loads(v) for v in VALID[fmt][:6]]
    messages += _DEBEZIUM_MORE if fmt == "debezium_json" else []
    tried = 0
    for msg in messages:
        for path in _leaves(msg):
            for value in _CONFUSED:
                out = _decode([json.dumps(_with(msg, path, value)).encode()], fmt)
                stats = Counter({r["stat"]: r["n"] for r in out if r["kind"] == "stat"})
                used = ("records_consumed", "records_quarantined", "records_carried_out")
                assert stats["records_in"] == sum(stats[k] for k in used) == 1, (path, value)
                tried += 1
    assert tried > 100


def _with_seq_ids(values: list[bytes], seq_of: list[int]) -> list[bytes]:
    """Tencent records whose entries' seqIds are `seq_of[i]` plus the entry's place (one
    envelope a record)."""
    from recon._proto import tencent_subscribe_pb2 as pb

    out = []
    for v, base in zip(values, seq_of, strict=True):
        env = pb.Envelope.FromString(v)
        entries = pb.Entries.FromString(env.data)
        for j, e in enumerate(entries.items):
            e.header.seqId = min(base + j, 2**64 - 1)
        env.data = entries.SerializeToString()
        out.append(env.SerializeToString())
    return out


_SIX = sample.workload(datetime(2026, 11, 20, tzinfo=UTC), 1, txns_per_hour=6, seed=5)
_WHOLE = [r.value for r in sample.to_records(sample.encode_tencent(_SIX, 10**6), "t")]
"""The sample's Tencent records, one envelope each (so entries can be renumbered)."""


@settings(max_examples=examples(60), deadline=None)
@given(
    seqs=st.lists(
        st.one_of(
            st.integers(0, 2**64 - 1),
            st.sampled_from([0, 1, 2**63 - 2, 2**63, 2**63 + 5, 2**64 - 200]),
        ),
        min_size=len(_WHOLE),
        max_size=len(_WHOLE),
    )
)
@example(
    seqs=[1, 20, 40, 2**63 + 5, *range(2**63 + 25, 2**63 + 20 * len(_WHOLE), 20)][: len(_WHOLE)]
).via("a jump of 2^63: seq_missing overflowed int64 and failed the task on every retry")
@pytest.mark.parametrize("lanes", [True, False])
def test_any_tencent_seq_ids_decode_with_counters_that_fit(seqs: list[int], lanes: bool) -> None:
    """Issue 79 item 1: counters saturate at int64's largest value; every record is accounted
    for and the events are those of the stream numbered 1, 2, 3, ... whatever the numbers."""
    import pyarrow as pa

    from recon.core.model import OUTPUT_SCHEMA
    from recon.decode.stream import INT64_MAX, decode_raw

    def run(values: list[bytes]) -> list[dict]:
        recs = [RawRecord("t", 0, i, None, v, 0) for i, v in enumerate(values)]
        batches = decode_raw(recs, "tencent_dts_pb", CTX, lanes=lanes)
        return pa.Table.from_batches(list(batches), schema=OUTPUT_SCHEMA).to_pylist()

    out = run(_with_seq_ids(_WHOLE, seqs))
    stats = {r["stat"]: r["n"] for r in out if r["kind"] == "stat"}
    assert all(0 <= n <= INT64_MAX for n in stats.values())
    assert stats["records_in"] == len(_WHOLE) == stats["records_consumed"]
    if seqs[1:3] == [20, 40] and seqs[3:4] == [2**63 + 5]:  # the example: its jump counted
        assert stats["seq_gaps"] >= 1 and stats["seq_missing"] == INT64_MAX  # saturated
    plain = run(_with_seq_ids(_WHOLE, [1 + 20 * i for i in range(len(_WHOLE))]))
    change = operator.itemgetter("op", "db", "tbl", "before", "after")
    assert sorted(map(str, map(change, (e for e in out if e["kind"] == "event")))) == sorted(
        map(str, map(change, (e for e in plain if e["kind"] == "event")))
    )
