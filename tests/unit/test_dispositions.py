"""Every record a decoder is fed leaves it exactly once: consumed (events or control), carried to
the next hour, or quarantined. The stream driver counts each disposition as it happens, so the
audit's identity (distinct + carried in = consumed + carried out + quarantined) is made of
independent counts and a record a decoder drops shows up (issue 12, item 7)."""

from __future__ import annotations

import json
import random

import pytest

from recon.audit.rules import dispositions
from recon.core.model import RawRecord
from recon.decode.formats.dataworks_json import DataworksJsonDecoder
from recon.decode.formats.tencent_dts_pb import TencentDtsPbDecoder
from recon.decode.stats import is_detail
from recon.decode.stream import decode_records
from recon.demo import sample
from recon.demo.demo import DEMO_START
from recon.formats import FORMAT_SPECS
from tests.support.hourly import carried_records


def _decode(recs: list[RawRecord], fmt: str) -> dict:
    out = decode_records(recs, fmt).to_pylist()
    totals: dict[str, int] = {}
    for r in out:
        if r["kind"] == "stat" and not is_detail(r["stat"]):
            totals[r["stat"]] = totals.get(r["stat"], 0) + r["n"]
    totals.setdefault("records_consumed", 0)
    return {
        "rows": out,
        "totals": totals,
        "link": dispositions(totals, totals.get("records_in", 0)),
        "quarantine": [r for r in out if r["kind"] == "quarantine"],
        "carry": [r for r in out if r["kind"] == "carry"],
    }


def _damage(recs: list[RawRecord], rng: random.Random) -> None:
    for r in rng.sample(recs, max(1, len(recs) // 15)):
        if r.value:
            b = bytearray(r.value)
            b[rng.randrange(len(b))] ^= 0xFF
            r.value = bytes(b[: rng.randrange(1, len(b) + 1)])


@pytest.mark.parametrize("fmt", sorted(FORMAT_SPECS))
def test_each_record_has_exactly_one_disposition_across_hour_cuts(fmt: str) -> None:
    rng = random.Random(fmt)
    txns = sample.workload(DEMO_START, 2, txns_per_hour=10, seed=11)
    enc = sample.ENCODERS[fmt]
    out = enc(txns, segment_bytes=60) if fmt == "tencent_dts_pb" else enc(txns)
    recs = sample.to_records(out, "t")
    _damage(recs, rng)
    for cut in sorted(rng.sample(range(1, len(recs)), 6)):
        first = _decode(recs[:cut], fmt)
        second = _decode(carried_records(first["rows"]) + recs[cut:], fmt)
        for hour in (first, second):
            link = hour["link"]
            assert link["balanced"] and link["lost"] == 0, (cut, link)
        assert first["link"]["carried_out"] == second["link"]["carried_in"]


def test_a_dropped_record_unbalances_the_identity_and_keeps_its_bytes(monkeypatch) -> None:
    # fault injection: a decoder that forgets what it held (returns no carry)
    monkeypatch.setattr(DataworksJsonDecoder, "finish", lambda self: [])
    r = _decode(
        [RawRecord("t", 0, 0, None, _dw("UPDATE_BEFOR", "5", before={"id": 1}))], "dataworks_json"
    )
    assert not r["link"]["balanced"] and r["link"]["lost"] == 1
    (q,) = r["quarantine"]
    assert q["reason"].startswith("lost by the dataworks_json decoder") and q["raw_value"]


def test_a_decoder_finish_that_raises_quarantines_what_it_held(monkeypatch) -> None:
    def boom(self):
        raise RuntimeError("injected")

    monkeypatch.setattr(DataworksJsonDecoder, "finish", boom)
    recs = [
        RawRecord("t", 0, 0, None, _dw("UPDATE_BEFOR", "5", before={"id": 1})),
        RawRecord("t", 0, 1, None, _dw("INSERT", "6", after={"id": 2})),
    ]
    r = _decode(recs, "dataworks_json")
    assert r["link"]["balanced"] and r["link"]["consumed"] == 1
    (q,) = r["quarantine"]
    assert q["offset"] == 0
    assert q["reason"] == "decoder error at the end of the hour: RuntimeError: injected"


def test_an_error_after_tencent_reassembly_quarantines_every_segment(monkeypatch) -> None:
    def boom(self, *a):
        raise RuntimeError("injected")

    monkeypatch.setattr(TencentDtsPbDecoder, "_dml", boom)
    txns = sample.workload(DEMO_START, 1, txns_per_hour=1, seed=3)
    recs = sample.to_records(sample.encode_tencent(txns, segment_bytes=40), "t")
    assert len(recs) > 3  # the envelope is segmented
    r = _decode(recs, "tencent_dts_pb")
    assert r["link"]["balanced"] and r["link"]["lost"] == 0
    assert {q["offset"] for q in r["quarantine"]} == {x.offset for x in recs}
    assert all("RuntimeError: injected" in q["reason"] for q in r["quarantine"])


def test_a_repeated_dataworks_update_befor_quarantines_the_earlier_one() -> None:
    recs = [
        RawRecord("t", 0, 0, None, _dw("UPDATE_BEFOR", "5", before={"id": 1})),
        RawRecord("t", 0, 1, None, _dw("UPDATE_BEFOR", "5", before={"id": 1})),
        RawRecord("t", 0, 2, None, _dw("UPDATE_AFTER", "5", after={"id": 1})),
    ]
    r = _decode(recs, "dataworks_json")
    assert r["link"]["balanced"] and r["link"]["consumed"] == 2
    (q,) = r["quarantine"]
    assert q["offset"] == 0 and q["reason"].startswith("repeated UPDATE_BEFOR")


def test_hours_decoded_before_consumption_was_counted_still_read() -> None:
    old = {"records_in": 5, "records_carried_out": 1, "records_quarantined": 1}
    link = dispositions(old, 5)
    assert link["balanced"] and link["consumed"] == 3 and not link["consumed_counted"]
    new = dict(old, records_consumed=2)  # one record unaccounted for
    assert not dispositions(new, 5)["balanced"]


def _dw(op: str, seq: str, before: dict | None = None, after: dict | None = None) -> bytes:
    return json.dumps(
        {
            "schema": {
                "dataColumn": [{"name": "id", "type": "LONG"}],
                "primaryKey": ["id"],
                "source": {"dbName": "s", "tableName": "t"},
            },
            "payload": {
                "op": op,
                "sequenceId": seq,
                "before": {"dataColumn": before} if before else None,
                "after": {"dataColumn": after} if after else None,
            },
        }
    ).encode()
