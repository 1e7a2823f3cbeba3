"""The merge of an hour from its winners (`recon.merge.winners`): two pipelines merge the same
hours side by side, one from every event, one from the winners the decode tasks' pre-fold left
(`recon.decode.premerge.prefold`, written as a task writes them). After every hour, in either write
mode, their tables, state, bucket records and merge results say the same: the changes that
entered by op, those stale or already applied when hours are merged again out of order, key
moves and deletes; and a table whose hour has a value that does not fit, or whose events do
not state the merge's key, is merged from every event."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from recon.config import PipelineConfig
from recon.merge.stage import merge_hour
from recon.publish.export import export_rows
from tests.support.builders import pipeline
from tests.support.merge import bucket_records, event, hour, said, state_tables, write_hour

T = {"id": "int32", "v": "string", "n": "int64"}
PK = ["id"]


def ev(n: int, table: str, op: str, before: Any, after: Any, pk: list[str] | None = PK) -> Any:
    return event(n, table, op, before, after, T, pk=pk)


def row(k: int, v: str, n: int = 1) -> dict[str, Any]:
    return {"id": k, "v": v, "n": n}


def hours() -> list[list[dict[str, Any]]]:
    """Hour 0 inserts keys and changes most of them again and again; hour 1 updates, deletes,
    re-inserts a deleted key, moves a key it just changed (its tombstone carries the changes
    it beat), and brings a change older than hour 0's of its key; hour 2 changes keys again,
    one with a value that does not fit its column (`n` is a number)."""
    h0 = [ev(k + 1, "s.a", "insert", None, row(k, "a")) for k in range(30)]
    h0 += [ev(100 + 10 * k + i, "s.a", "update", row(k, str(i)), row(k, str(i + 1)))
           for k in range(20) for i in range(4)]  # fmt: skip
    h0 += [ev(400 + k, "s.b", "insert", None, row(k % 3, "x"), pk=[]) for k in range(6)]
    h0 += [ev(450 + k, "s.c", "insert", None, row(k, "c"), pk=[]) for k in range(5)]
    h0 += [ev(460 + k, "s.c", "update", row(k, "c"), row(k, "d"), pk=[]) for k in range(5)]
    # events that state another key than the table's: rows of one `v` and many ids
    h0 += [ev(480 + k, "s.d", "insert", None, row(k, "same"), pk=["v"]) for k in range(5)]
    h1 = [ev(1000 + 10 * k + i, "s.a", "update", row(k, "u"), row(k, f"h1-{i}"))
          for k in range(0, 12) for i in range(3)]  # fmt: skip
    h1 += [ev(1200 + k, "s.a", "delete", row(k, "h1-2"), None) for k in (3, 4)]
    h1 += [ev(1210, "s.a", "insert", None, row(3, "back"))]
    h1 += [ev(1220 + i, "s.a", "update", row(25, "a"), row(25, f"m{i}")) for i in range(3)]
    h1 += [ev(1230, "s.a", "update", row(25, "m2"), row(99, "moved"))]
    h1 += [ev(50, "s.a", "update", row(15, "a"), row(15, "late"))]  # older than hour 0's
    h1 += [ev(1240 + k, "s.b", "delete", row(k, "x"), None, pk=[]) for k in range(2)]
    h2 = [ev(2000 + 10 * k + i, "s.a", "update", row(k, "u"), row(k, f"h2-{i}"))
          for k in range(5, 15) for i in range(2)]  # fmt: skip
    h2 += [ev(2300, "s.a", "update", row(7, "h2-1"), {"id": 7, "v": "bad", "n": "x"})]
    h2 += [ev(2310 + i, "s.c", "update", row(1, "d"), row(1, f"e{i}"), pk=[]) for i in range(3)]
    return [h0, h1, h2]


def twins(tmp_path: Path, mode: str) -> tuple[PipelineConfig, PipelineConfig]:
    tables = {"s.a": {"primary_key": PK}, "s.b": {}, "s.c": {"primary_key": PK},
              "s.d": {"primary_key": PK}}  # fmt: skip
    every = pipeline(tmp_path / "every", tables, write_mode=mode)
    won = pipeline(tmp_path / "winners", tables, write_mode=mode)
    return every, won


def assert_same(spark: SparkSession, a: PipelineConfig, b: PipelineConfig) -> None:
    for name in ("s.a", "s.b", "s.c", "s.d"):
        assert list(export_rows(b, name, with_metadata=True)) == list(
            export_rows(a, name, with_metadata=True)
        ), name
    assert bucket_records(b) == bucket_records(a)
    assert state_tables(spark, b) == state_tables(spark, a)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_the_winners_merge_to_what_every_event_merges_to(
    spark: SparkSession, tmp_path: Path, mode: str
) -> None:
    every, won = twins(tmp_path, mode)
    hs = hours()
    folded: dict[int, dict[str, int]] = {}
    checked: dict[int, dict[str, bool]] = {}

    def merge(i: int) -> None:
        write_hour(every, hour(i), hs[i])
        write_hour(won, hour(i), hs[i], prefold=True)
        a = merge_hour(spark, every, hour(i), buckets=4)
        b = merge_hour(spark, won, hour(i), buckets=4)
        assert said(b) == said(a), i
        assert all(t.get("folded_in_decode", 0) == 0 for t in a["tables"].values())
        folded[i] = {n: t.get("folded_in_decode", 0) for n, t in b["tables"].items()}
        checked[i] = {n: t.get("checked_in_decode", False) for n, t in b["tables"].items()}
        assert not any(t.get("checked_in_decode") for t in a["tables"].values())
        assert_same(spark, every, won)

    for i in range(3):
        merge(i)
    # hour 0 folded 80 changes of s.a away; hour 1 its repeated updates and the moved key's
    assert folded[0] == {"s.a": 80, "s.b": 0, "s.c": 0, "s.d": 0}
    # keys 0-11: two of three updates (3, 4: all three, and the delete by the re-insert of 3);
    # the moved key 25: its three updates, by the move's tombstone
    assert folded[1]["s.a"] == 10 * 2 + 2 * 3 + 1 + 3 and folded[1]["s.c"] == 0
    assert folded[2]["s.a"] == 0  # a value that does not fit: every event
    # the decode's classes of the values showed them to fit, so no value was cast to check
    # it, whether the table merged from winners or not (keyless `s.b`, `s.d` keyed otherwise);
    # hour 2's value that does not fit has no class: that table's events were checked
    assert checked[0] == {"s.a": True, "s.b": True, "s.c": True, "s.d": True}
    assert checked[2] == {"s.a": False, "s.b": True, "s.c": True, "s.d": True}
    # hours merged again, out of order: changes stale or already applied, counted alike
    for i in (1, 0):
        merge(i)
    assert folded[1]["s.a"] == 30


def test_a_winners_folder_changed_since_the_decode_is_not_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The decode's record of the winners' files must match the folder (a decode of the hour
    again, or a file lost): else the merge reads every event, and merges the same."""
    every, won = twins(tmp_path, "merge-on-read")
    h0 = hours()[0]
    write_hour(every, hour(0), h0)
    write_hour(won, hour(0), h0, prefold=True)
    shutil.rmtree(won.layout.winners(hour(0)))
    a = merge_hour(spark, every, hour(0), buckets=4)
    b = merge_hour(spark, won, hour(0), buckets=4)
    assert said(b) == said(a) and b["tables"]["s.a"]["folded_in_decode"] == 0
    assert_same(spark, every, won)
