"""The audit's GTID span per source (first, last, distinct numbers): read by Arrow on the driver,
with no Spark job, and by the Spark job for what that reading declines; both against the rule
in Python and against each other."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recon.audit import gtid as arrow_gtid
from recon.audit.facts import event_facts, spark_gtid_spans
from recon.core.watermark import ascii_lower
from recon.layout import Layout

H0 = datetime(2026, 5, 1, 0, tzinfo=UTC)
UUID = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
I64_MAX = 2**63 - 1


def _write(layout: Layout, name: str, gtids: list[str | None]) -> None:
    layout.events(H0).mkdir(parents=True, exist_ok=True)
    table = pa.table({"gtid": pa.array(gtids, pa.string()), "event_time_ms": [1] * len(gtids)})
    pq.write_table(table, layout.events(H0) / name)


def _rule(gtids: list[str | None]) -> dict[str, dict[str, int]]:
    """The spans by the rule, in Python: a MySQL source is the text before the last `:` in
    ASCII lower case, a MariaDB one its domain (the first `-` field); the number (the text
    after that `:`, or the third `-` field) counts where it is ASCII digits that fit a long."""
    want: dict[str, set[int]] = {}
    for g in gtids:
        if not g:
            continue
        if ":" in g:
            src, num = g.rsplit(":", 1)
            src = ascii_lower(src)
        else:
            parts = g.split("-")
            src, num = f"domain {parts[0]}", parts[2] if len(parts) >= 3 else ""
        if re.fullmatch("[0-9]+", num) and int(num) <= I64_MAX:
            want.setdefault(src, set()).add(int(num))
    return {s: {"first": min(v), "last": max(v), "distinct": len(v)} for s, v in want.items()}


ODD_GTIDS = [
    *(f"{UUID}:{n}" for n in (1, 2, 2, 5, 32768, 32769, 100_000, I64_MAX)),
    *(f"{UUID.lower()}:{n}" for n in (2, 3, 70_000)),
    f"{UUID}:tag_a:7",
    f"{UUID}:tag_a:7",
    f"{UUID}:TAG_A:9",
    f"{UUID}:1-5",  # a set, not a number
    f"{UUID}:{2**63}",  # beyond a long
    f"{UUID}:000{I64_MAX}",  # leading zeros: still a long
    f"{UUID}:0",
    f"{UUID}:007",
    f"{UUID}:",
    f"{UUID}: 8",
    f"{UUID}:+8",
    f"{UUID}:\u0661\u0662",  # digits, but not ASCII ones
    "ÀB-É:4",  # only A-Z change case
    "domain 1:3",  # a MySQL source named as a MariaDB domain: one source, as in Spark
    "0-1-100",
    "0-2-101",
    "0-1-100",
    "1-1-7",
    "1-1-7-9",  # a fourth field: the third is the number
    "2-5",  # no third field
    "0-1-x",
    "",
    None,
]


@pytest.mark.parametrize("reader", ["arrow", "spark"])
def test_spans_count_each_sources_distinct_numbers(spark, tmp_path: Path, reader: str) -> None:
    """Each reading of the spans against the rule in Python: server UUIDs in either case are
    one source, MySQL 8.4 tags are part of it, a MariaDB source is its domain; a number only
    where the text is ASCII digits that fit a long; every event of a transaction repeats its
    GTID; numbers far apart are counted apart."""
    layout = Layout(tmp_path / "wh", "g")
    _write(layout, "part-0.parquet", ODD_GTIDS)
    expected = _rule(ODD_GTIDS)
    assert len(expected) == 5  # a UUID in either case, its tag, `ÀB-É`, domains 0 and 1
    if reader == "arrow":
        assert arrow_gtid.arrow_gtid_spans(layout.events(H0)) == expected
    else:
        assert spark_gtid_spans(spark.read.parquet(str(layout.events(H0)))) == expected


def _random_gtids(rng: random.Random, n: int) -> list[str | None]:
    """GTIDs of a few sources, mostly running on, some scattered, some not numbers."""
    uuids = [f"{rng.getrandbits(128):032x}" for _ in range(3)]
    out: list[str | None] = []
    for _ in range(n):
        u = rng.choice(uuids)
        pick = rng.random()
        if pick < 0.55:
            out.append(f"{u}:{rng.randint(1, 3000)}")
        elif pick < 0.65:
            out.append(f"{u.upper()}:{rng.randint(1, 3000)}")
        elif pick < 0.7:
            out.append(f"{u}:t{rng.randint(0, 2)}:{rng.randint(1, 50)}")
        elif pick < 0.85:
            out.append(f"{rng.randint(0, 2)}-{rng.randint(1, 3)}-{rng.randint(1, 2000)}")
        elif pick < 0.9:
            out.append(f"{u}:{rng.randint(0, I64_MAX)}")
        elif pick < 0.95:
            out.append(
                rng.choice(["", None, f"{u}:1-9", f"{u}:x", "7-1", f"{u}:0{rng.randint(1, 9)}"])
            )
        else:
            out.append(f"{u}:{rng.choice([I64_MAX, I64_MAX - 1, 2**63, 2**64])}")
    return out


def test_arrow_and_spark_read_random_gtids_alike(spark, tmp_path: Path, monkeypatch) -> None:
    """Random GTIDs over three files, read by Arrow in batches of 97 rows (a source's
    intervals joined across batches and files), against the Spark job and the rule."""
    monkeypatch.setattr(arrow_gtid, "_BATCH", 97)
    rng = random.Random(14)
    layout = Layout(tmp_path / "wh", "g")
    every: list[str | None] = []
    for i in range(3):
        gtids = _random_gtids(rng, 4000)
        every += gtids
        _write(layout, f"part-{i}.parquet", gtids)
    by_arrow = arrow_gtid.arrow_gtid_spans(layout.events(H0))
    assert by_arrow == spark_gtid_spans(spark.read.parquet(str(layout.events(H0))))
    assert by_arrow == _rule(every) and len(by_arrow) > 3


def _jobs_of(spark, group: str, fn: Any) -> tuple[Any, list[int]]:
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        got = fn()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return got, list(sc.statusTracker().getJobIdsForGroup(group))


def test_an_hours_spans_run_no_spark_job(spark, tmp_path: Path) -> None:
    """Events with no GTID (all NULL or empty, as DataWorks' are) have no spans; events with
    them (one late in the hour's last file) have theirs; neither runs a Spark job."""
    layout = Layout(tmp_path / "wh", "g")
    _write(layout, "part-0.parquet", [None] * 70_000 + [""] * 3)  # more than one batch
    got, jobs = _jobs_of(spark, "no-gtids", lambda: event_facts(spark, layout, H0, {}))
    assert got == ({}, {}) and jobs == []
    uuid = UUID.lower()
    _write(layout, "part-1.parquet", [None] * 70_000 + ["", f"{uuid}:5", f"{uuid}:7", f"{uuid}:7"])
    got, jobs = _jobs_of(spark, "gtids", lambda: event_facts(spark, layout, H0, {}))
    assert got == ({}, {uuid: {"first": 5, "last": 7, "distinct": 2}}) and jobs == []


@pytest.mark.parametrize("case", ["line end", "scattered"])
def test_what_arrow_declines_spark_counts(spark, tmp_path: Path, monkeypatch, case: str) -> None:
    """A GTID with one of Java's line terminators in it, or numbers too scattered for the
    driver's cap on intervals: the Arrow reading declines, and the Spark job counts them."""
    layout = Layout(tmp_path / "wh", "g")
    gtids: list[str | None] = [f"{UUID}:{n}" for n in range(1, 200, 2)]  # 100 intervals
    if case == "line end":
        gtids += [f"{UUID}\u2028x:5", f"{UUID}:6\n", "0-1-9\r"]
    else:
        monkeypatch.setattr(arrow_gtid, "MAX_INTERVALS", 99)
    _write(layout, "part-0.parquet", gtids)
    assert arrow_gtid.arrow_gtid_spans(layout.events(H0)) is None
    got, jobs = _jobs_of(spark, f"declined-{case}", lambda: event_facts(spark, layout, H0, {}))
    assert got == ({}, spark_gtid_spans(spark.read.parquet(str(layout.events(H0))))) and jobs
    assert got[1][UUID.lower()]["distinct"] == 100 + (case == "line end")  # `:6\n` reads as 6


def test_intervals_join_across_batches() -> None:
    """`_union`: runs that touch or overlap are joined, the rest kept apart, up to a long's
    largest value."""
    iv = arrow_gtid._union(None, np.array([5, 3, 4, 9, I64_MAX], np.int64))
    assert iv.tolist() == [[3, 5], [9, 9], [I64_MAX, I64_MAX]]
    iv = arrow_gtid._union(iv, np.array([6, 8, I64_MAX - 1, 1], np.int64))
    assert iv.tolist() == [[1, 1], [3, 6], [8, 9], [I64_MAX - 1, I64_MAX]]
    iv = arrow_gtid._union(iv, np.array([2, 7], np.int64))
    assert iv.tolist() == [[1, 9], [I64_MAX - 1, I64_MAX]]
