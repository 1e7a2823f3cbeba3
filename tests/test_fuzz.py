"""Random and truncated bytes never crash a decoder: every bad record is quarantined with its
original bytes and a reason, and the records after it still decode."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recon import sample
from recon.config import TableConfig
from recon.decoders import FORMATS, DecodeContext
from recon.model import RawRecord
from recon.stream import decode_records

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


def _accounted(out: list[dict], n: int) -> None:
    stats = {r["stat"]: r["n"] for r in out if r["kind"] == "stat"}
    assert stats.get("records_in", 0) == n
    for q in out:
        if q["kind"] == "quarantine":
            assert q["reason"] and q["offset"] is not None


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=60, deadline=None)
@given(garbage=st.lists(st.binary(max_size=200), min_size=1, max_size=5))
def test_random_bytes_are_quarantined_not_crashing(fmt: str, garbage: list[bytes]) -> None:
    out = _decode(list(garbage), fmt)
    _accounted(out, len(garbage))
    quarantined = {r["offset"]: r["raw_value"] for r in out if r["kind"] == "quarantine"}
    for off, raw in quarantined.items():
        assert raw == garbage[off]


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=40, deadline=None)
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
    _accounted(out, len(values))
    # whatever happens to the broken record (and, for transactions, its transaction), nothing
    # crashes and the run goes on: the last transaction still decodes, unless it was the one cut
    events = [r for r in out if r["kind"] == "event"]
    last_ok = _decode(values, fmt)
    last_event = [r for r in last_ok if r["kind"] == "event"][-1]
    if not any(r["kind"] == "quarantine" for r in out):
        return  # a truncation protobuf still parsed: nothing to show here beyond no crash
    assert any(e["order_key"] == last_event["order_key"] for e in events) or i >= len(values) - 4


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
