"""Random splits into hours, duplicates and shuffles of a valid stream decode to the same events
as the clean stream, for every format (hypothesis)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recon.config import TableConfig
from recon.core.model import RawRecord
from recon.decode.base import DecodeContext
from recon.demo import sample
from recon.formats import FORMATS
from tests.support.examples import examples
from tests.support.hourly import decode_by_hours, event_key

TXNS = sample.workload(datetime(2026, 11, 20, tzinfo=UTC), 1, txns_per_hour=10, seed=3)
CTX = DecodeContext(
    tables={"shop.orders": TableConfig("shop.orders", ddl=sample.CREATE_SQL).table_def()}
)  # type: ignore[dict-item]
STREAMS = {fmt: sample.to_records(enc(TXNS), f"t_{fmt}") for fmt, enc in sample.ENCODERS.items()}
CLEAN = {fmt: decode_by_hours([recs], fmt, CTX) for fmt, recs in STREAMS.items()}


def test_clean_streams_decode_fully() -> None:
    for fmt in FORMATS:
        events, quarantine, stats = CLEAN[fmt]
        assert not quarantine and stats["left_carried"] == 0, fmt
        assert len([e for e in events if e["op"] != "ddl"]) == sum(len(t.changes) for t in TXNS), (
            fmt
        )


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_splits_duplicates_and_shuffles_do_not_change_events(fmt: str, data: st.DataObject) -> None:
    recs = STREAMS[fmt]
    n = len(recs)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=4), label="hour cuts"))
    bounds = [0, *cuts, n]
    hours = [list(recs[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    # the dumper is at-least-once: a record can come again, in its hour or a later one
    for i in data.draw(st.lists(st.integers(0, n - 1), max_size=8), label="duplicated records"):
        h_orig = next(
            h for h, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)) if a <= i < b
        )
        h = data.draw(st.integers(h_orig, len(hours) - 1), label="duplicate lands in hour")
        r = recs[i]
        hours[h].append(RawRecord(r.topic, r.partition, r.offset, r.key, r.value, r.ts_ms))
    for h in hours:
        data.draw(st.randoms(use_true_random=False), label="shuffle").shuffle(h)
    events, quarantine, stats = decode_by_hours(hours, fmt, CTX)
    clean_events = CLEAN[fmt][0]
    assert not quarantine
    assert stats["left_carried"] == 0
    assert sorted(map(event_key, events)) == sorted(map(event_key, clean_events))


@given(a=st.integers(min_value=-(2**140), max_value=2**140), b=st.integers(-(2**140), 2**140))
def test_order_key_components_clamp_to_their_width_and_sort_as_numbers(a: int, b: int) -> None:
    """u32/u64/u128 write a number clamped to [0, 2^bits - 1], fixed width, big-endian: their
    bytes compare as the clamped numbers do (the order keys' premise, contract 5.1)."""
    from recon.core.order import u32, u64, u128

    for f, width in ((u32, 4), (u64, 8), (u128, 16)):
        top = (1 << (8 * width)) - 1
        ca, cb = min(max(a, 0), top), min(max(b, 0), top)
        assert len(f(a)) == width and int.from_bytes(f(a), "big") == ca
        assert (f(a) < f(b)) == (ca < cb) and (f(a) == f(b)) == (ca == cb)


_WIDE = st.integers(-(2**70), 2**70)


@given(file_n=st.integers(-5, 2**66), pos=st.none() | _WIDE, row=_WIDE, part=_WIDE, offset=_WIDE)
def test_kafka_tail_and_binlog_key_are_their_clamped_components(
    file_n: int, pos: int | None, row: int, part: int, offset: int
) -> None:
    """The Kafka tail and the binlog order key (written without calls for in-range numbers)
    are their components' clamped bytes, out of range too."""
    from recon.core.order import binlog_key, kafka_tail, u32, u64

    tail = u32(part) + u64(offset)
    assert kafka_tail(part, offset) == tail
    name = f"mysql-bin.{file_n}" if file_n >= 0 else None
    head = u64(max(file_n, 0)) + u64(pos or 0) + u32(row)
    assert binlog_key(name, pos, row, part, offset) == head + tail


def test_binlog_file_numbers() -> None:
    from recon.core.order import binlog_file_number

    assert binlog_file_number("mysql-bin.000003") == 3
    assert binlog_file_number("mysql-bin.000003") == 3  # cached: the same answer
    assert binlog_file_number("binlog") == 0 and binlog_file_number(None) == 0
    assert binlog_file_number("") == 0


def test_a_binlog_file_name_of_any_length_is_read_in_linear_time_and_clamped() -> None:
    """Issue 79 item 9: the trailing digits were found by a regex search, quadratic in a long
    run of digits (20k: 5.5 s), and int() refused more than 4,300 of them."""
    from recon.core.order import binlog_file_number, binlog_key

    assert binlog_file_number("1" * 20_000 + "x") == 0
    assert binlog_file_number("mysql-bin." + "9" * 20_000) == 2**64  # past 64 bits: no error
    assert binlog_file_number("bin.٣") == 3  # a decimal digit of another script, as before
    # the order key clamps it to 64 bits, as the lanes' C reads do
    assert binlog_key("b." + "9" * 5000, 1, 0, 0, 0)[:8] == b"\xff" * 8
