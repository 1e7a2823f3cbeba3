"""History tables (`history: true`, `recon.publish.history`): the versions of every row, each
valid from its change's source time to the next change of its key. Against the reference fold
of a random change stream: the rows valid at the time of every change are the source's rows
right after it; an hour merged again, in any order, leaves the same history; a rollback takes
the later hours' versions out and opens again what they ended."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from recon.config import PipelineConfig, load_config
from recon.errors import ReconError
from recon.hours import format_hour
from recon.merge.stage import merge_hour
from recon.ops.rebuild import rebuild
from recon.ops.rollback import rollback
from recon.publish.export import export_as_of_time, export_rows
from recon.publish.history import load_history
from tests.support.builders import edit_pipeline, pipeline
from tests.support.changes import change_streams, oracle, split_hours
from tests.support.merge import T, event, hour, write_hour

TABLES = {"s.a": {"primary_key": ["id"], "history": True}, "s.b": {}}


def at_change(n: int) -> datetime:
    """The source commit time of change `n` (`tests.support.merge.event`'s)."""
    return datetime.fromtimestamp((1_767_225_600_000 + n * 1000) / 1000, UTC)


def versions(cfg: PipelineConfig) -> list[dict[str, Any]]:
    """Every row of the history table, in a fixed order."""
    rows = load_history(cfg, "s.a").scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: (r["__key"], r["__order_key"]))


def source_at(events: list[dict[str, Any]], n: int) -> list[tuple[tuple[str, str], ...]]:
    """Table s.a's rows right after change `n` (the reference fold of the changes up to it)."""
    return oracle([e for e in events if e["offset"] <= n])["s.a"]


def history_at(cfg: PipelineConfig, n: int) -> list[tuple[tuple[str, str], ...]]:
    """Table s.a's rows as its history says they were at change `n`'s time, as the oracle's."""
    rows = export_as_of_time(cfg, "s.a", at_change(n))
    return sorted(tuple(sorted((k, str(v)) for k, v in r.items())) for r in rows)


def check_history(cfg: PipelineConfig, events: list[dict[str, Any]]) -> None:
    """The rows valid at every change's time (and before the first) are the source's then; one
    version open per live key, and those are the published rows."""
    for n in [0, *(e["offset"] for e in events)]:
        assert history_at(cfg, n) == source_at(events, n), f"as of change {n}"
    live = [r for r in versions(cfg) if r["__valid_to"] is None]
    assert len({r["__key"] for r in live}) == len(live)
    published = sorted((r["id"], r["v"]) for r in export_rows(cfg, "s.a"))
    assert sorted((r["id"], r["v"]) for r in live) == published


@settings(
    max_examples=1,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(events=change_streams(), cuts=st.lists(st.integers(0, 100), min_size=2, max_size=3))
def test_the_history_holds_the_source_as_of_every_change_whatever_the_merge_order(
    spark: SparkSession, tmp_path: Path, events: list[dict[str, Any]], cuts: list[int]
) -> None:
    """A random change stream split into hours, merged in order, then every hour again in
    reverse order (re-runs, backfills: each hour's versions replaced by the same ones)."""
    shutil.rmtree(tmp_path / "p", ignore_errors=True)
    cfg = pipeline(tmp_path / "p", TABLES)
    split = split_hours(events, cuts)
    for i, evs in enumerate(split):
        write_hour(cfg, hour(i), evs)
        merge_hour(spark, cfg, hour(i), buckets=4)
    check_history(cfg, events)
    first = versions(cfg)
    assert {r["__hour"] for r in first} <= {format_hour(hour(i)) for i in range(len(split))}
    for i in reversed(range(len(split))):
        merge_hour(spark, cfg, hour(i), buckets=4)
    assert versions(cfg) == first


def test_a_late_change_takes_its_place_among_the_versions(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A change that arrives an hour after a later one of its key (a producer's late retry)
    becomes the version between them: the history is by source order, not arrival."""
    cfg = pipeline(tmp_path, TABLES)
    ins = event(1, "s.a", "insert", None, {"id": 1, "v": "a"}, T, ["id"])
    late = event(2, "s.a", "update", {"id": 1, "v": "a"}, {"id": 1, "v": "b"}, T, ["id"])
    last = event(3, "s.a", "update", {"id": 1, "v": "b"}, {"id": 1, "v": "c"}, T, ["id"])
    for i, evs in enumerate([[ins, last], [late]]):
        write_hour(cfg, hour(i), evs)
        merge_hour(spark, cfg, hour(i), buckets=4)
    check_history(cfg, [ins, late, last])
    assert [(r["v"], r["__hour"], r["__closed_hour"]) for r in versions(cfg)] == [
        ("a", "2026-01-01T00", "2026-01-01T01"),
        ("b", "2026-01-01T01", "2026-01-01T00"),
        ("c", "2026-01-01T00", None),
    ]


def test_a_rollback_takes_out_the_later_hours_versions_and_reopens_what_they_ended(
    spark: SparkSession, tmp_path: Path
) -> None:
    cfg = pipeline(tmp_path, TABLES)
    h0 = [event(n, "s.a", "insert", None, {"id": n, "v": "a"}, T, ["id"]) for n in (1, 2, 3)]
    h1 = [
        event(4, "s.a", "update", {"id": 1, "v": "a"}, {"id": 1, "v": "b"}, T, ["id"]),
        event(5, "s.a", "delete", {"id": 2, "v": "a"}, None, T, ["id"]),
        event(6, "s.a", "update", {"id": 3, "v": "a"}, {"id": 9, "v": "m"}, T, ["id"]),
    ]
    write_hour(cfg, hour(0), h0)
    merge_hour(spark, cfg, hour(0), buckets=4)
    after_h0 = versions(cfg)
    write_hour(cfg, hour(1), h1)
    merge_hour(spark, cfg, hour(1), buckets=4)
    full = versions(cfg)
    assert len(full) == 7  # three inserts, an update, a delete, a key change (two versions)

    rollback(str(cfg.source_file), format_hour(hour(0)))
    assert versions(cfg) == after_h0
    assert history_at(cfg, 6) == source_at(h0, 3)  # later times: as hour 0 left the source
    merge_hour(spark, cfg, hour(1), buckets=4)
    assert versions(cfg) == full
    check_history(cfg, h0 + h1)


def test_a_history_turned_on_later_is_built_by_a_rebuild(
    spark: SparkSession, tmp_path: Path
) -> None:
    """`history: true` set after hours were merged: `recon rebuild` builds the history of every
    decoded hour, the one a pipeline that kept it from the start has."""
    hours = [
        [event(n, "s.a", "insert", None, {"id": n, "v": "a"}, T, ["id"]) for n in (1, 2)],
        [
            event(3, "s.a", "update", {"id": 1, "v": "a"}, {"id": 1, "v": "b"}, T, ["id"]),
            event(4, "s.a", "delete", {"id": 2, "v": "a"}, None, T, ["id"]),
        ],
    ]
    kept = pipeline(tmp_path / "kept", TABLES)
    later = pipeline(tmp_path / "later", {"s.a": {"primary_key": ["id"]}, "s.b": {}})
    for i, evs in enumerate(hours):
        for c in (kept, later):
            write_hour(c, hour(i), evs)
            merge_hour(spark, c, hour(i), buckets=4)
    edit_pipeline(later.source_file, tables=TABLES)
    rebuild(str(later.source_file), None)
    later = load_config(later.source_file)
    assert versions(later) == versions(kept)
    check_history(later, hours[0] + hours[1])


def test_a_history_needs_a_primary_key(spark: SparkSession, tmp_path: Path) -> None:
    cfg = pipeline(tmp_path, {"s.b": {"history": True}})
    write_hour(cfg, hour(0), [event(1, "s.b", "insert", None, {"id": 1, "v": "x"}, T)])
    with pytest.raises(ReconError, match=r"s\.b keeps a history .* no primary key: declare"):
        merge_hour(spark, cfg, hour(0), buckets=4)


def test_a_table_without_history_is_refused_an_as_of_time_export(
    spark: SparkSession, tmp_path: Path
) -> None:
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}})
    with pytest.raises(ReconError, match=r"keeps no history; set `history: true`"):
        export_as_of_time(cfg, "s.a", at_change(1))
