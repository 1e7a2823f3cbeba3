"""A transaction's events are written to disk as they come once there are many of them, so a
huge transaction does not have to fit in memory until its COMMIT: the decode's output is the
same with the spill on every event as without, an open transaction at the hour's end is still
carried whole, an abandoned one still counts its events, and no spill file is left behind."""

from __future__ import annotations

import os
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from recon.config import TableConfig
from recon.core.model import RawRecord
from recon.decode import base
from recon.decode.base import DecodeContext
from recon.decode.stream import decode_records
from recon.demo import sample
from tests.support.hourly import decode_by_hours

H0 = datetime(2026, 11, 20, 0, tzinfo=UTC)
FORMATS = ["tencent_dts_pb", "tdsql_json", "canal_pb"]
_DEF = TableConfig("shop.orders", ddl=sample.CREATE_SQL).table_def()
assert _DEF is not None
CTX = DecodeContext(tables={"shop.orders": _DEF})


def _records(fmt: str) -> list[RawRecord]:
    """Transactions over several records (BEGIN, changes and COMMIT apart), as a large one
    comes: held by the decoder from record to record."""
    txns = sample.workload(H0, 1, txns_per_hour=12, seed=5)
    more = {} if fmt == "tdsql_json" else {"per_message": 1}
    return sample.to_records(sample.ENCODERS[fmt](txns, **more), "t")


def _rows(recs: list[RawRecord], fmt: str) -> Counter[str]:
    return Counter(repr(sorted(r.items())) for r in decode_records(recs, fmt, CTX).to_pylist())


@pytest.fixture
def spills(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Every event of an open transaction spilled; the files made, in a folder of the test's."""
    made: list[str] = []
    monkeypatch.setattr(base, "TXN_SPILL_EVENTS", 1)
    monkeypatch.setattr(base, "TXN_SPILL_BYTES", 1)
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))
    for kind in (base.EventSpill, base.ValueSpill):
        real = kind.__init__

        def counted(self: base.EventSpill | base.ValueSpill, real: Any = real) -> None:
            real(self)
            made.append(self.path)

        monkeypatch.setattr(kind, "__init__", counted)
    return made


def _held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "TXN_SPILL_EVENTS", 10**9)
    monkeypatch.setattr(base, "TXN_SPILL_BYTES", 10**12)


@pytest.mark.parametrize("fmt", FORMATS)
def test_spilled_transactions_decode_as_held_ones(fmt: str, spills: list[str], tmp_path) -> None:
    recs = _records(fmt)
    with pytest.MonkeyPatch.context() as held:
        _held(held)
        expected = _rows(recs, fmt)
    assert _rows(recs, fmt) == expected
    assert any(p.endswith(".values") for p in spills)  # events and values spilled
    assert not os.listdir(tmp_path)  # and every file deleted once read


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_spilled_transaction_open_at_the_hours_end_is_carried_whole(
    fmt: str, spills: list[str], tmp_path
) -> None:
    recs = _records(fmt)
    hours = [recs[: len(recs) // 2 + 1], recs[len(recs) // 2 + 1 :]]  # a cut inside a txn
    with pytest.MonkeyPatch.context() as held:
        _held(held)
        expected = decode_by_hours([list(h) for h in hours], fmt, CTX)
    got = decode_by_hours([list(h) for h in hours], fmt, CTX)
    key = lambda e: repr(sorted(e.items()))  # noqa: E731
    assert sorted(map(key, got[0])) == sorted(map(key, expected[0]))
    assert got[2] == expected[2]
    assert spills and not os.listdir(tmp_path)


def test_a_spilled_transaction_without_commit_counts_its_events_abandoned(
    spills: list[str], tmp_path
) -> None:
    recs = _records("tdsql_json")
    first_xid = next(i for i, r in enumerate(recs) if b'"eventtypestr":"xid"' in (r.value or b""))
    recs = recs[:first_xid] + recs[first_xid + 1 :]  # the producer lost the first COMMIT
    with pytest.MonkeyPatch.context() as held:
        _held(held)
        expected = _rows(recs, "tdsql_json")
    got = _rows(recs, "tdsql_json")
    assert got == expected
    assert any("events_abandoned" in r and "'n', 0)" not in r for r in got)
    assert spills and not os.listdir(tmp_path)
