"""Merge-on-read (`write_mode: merge-on-read`): an hour adds a delta to each bucket it touches
and publishes only its changed rows, with position deletes of the rows they replace. Two
pipelines are merged side by side from the same hours, one rewriting its buckets
(copy-on-write) and one merging on read: after every hour their tables, state and bucket
statistics are the same, hours merged again change nothing, and the buckets are rewritten (the
deltas folded in, the delete files dropped) once their deltas grow past their share."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from recon.config import PipelineConfig
from recon.errors import NoSavedStateError
from recon.faults import POINTS
from recon.hours import format_hour
from recon.merge.manifest import load_manifest
from recon.merge.stage import merge_hour
from recon.ops.expire import expire
from recon.ops.rollback import rollback
from recon.publish.deletes import read_snapshot_files
from recon.publish.export import export_rows
from recon.publish.iceberg import load_table
from tests.support.builders import pipeline
from tests.support.changes import change_streams, oracle, split_hours
from tests.support.merge import (
    KEYS,
    T,
    bucket_records,
    delete_files,
    event,
    hour,
    mor_hours,
    state_tables,
    up,
    write_hour,
)


def twins(tmp_path: Path, mor_folder: str = "mor") -> tuple[PipelineConfig, PipelineConfig]:
    tables = {"s.a": {"primary_key": ["id"]}, "s.b": {}}
    cow = pipeline(tmp_path / "cow", tables, write_mode="copy-on-write")
    mor = pipeline(tmp_path / mor_folder, tables, write_mode="merge-on-read")
    return cow, mor


def merge_both(spark: SparkSession, cfgs: tuple[PipelineConfig, ...], i: int) -> list[Any]:
    return [merge_hour(spark, c, hour(i), buckets=4) for c in cfgs]


def deltas(cfg: PipelineConfig) -> int:
    files = load_manifest(cfg)["tables"]["s.a"]["files"].values()
    return sum(len(f.get("deltas", [])) for f in files)


def assert_same(spark: SparkSession, cow: PipelineConfig, mor: PipelineConfig) -> None:
    for name in ("s.a", "s.b"):
        assert list(export_rows(mor, name, with_metadata=True)) == list(
            export_rows(cow, name, with_metadata=True)
        ), name
    assert bucket_records(mor) == bucket_records(cow)
    assert state_tables(spark, mor) == state_tables(spark, cow)
    # what Spark reads of the table (the audit's reconcile reads it so): one row a key
    df = read_snapshot_files(spark, load_table(mor, "s.a"), mor.layout.object_mirror)
    assert df is not None
    ids = [r["id"] for r in df.select("id").collect()]
    assert sorted(ids) == sorted(r["id"] for r in export_rows(cow, "s.a"))


def same_counts(r_cow: Any, r_mor: Any) -> None:
    """The merge results say the same of both pipelines' tables (the audit's balance reads
    them), but for what publish committed."""
    for name in ("s.a", "s.b"):
        cow = {k: v for k, v in r_cow["tables"][name].items() if k != "published"}
        assert {k: v for k, v in r_mor["tables"][name].items() if k != "published"} == cow


def skipped(result: Any) -> tuple[int, int, int]:
    t = result["tables"]["s.a"]
    return t["skipped"]["stale"], t["skipped"]["already_applied"], t["applied"]


# a folder whose path Spark names URL-encoded (`%20`, `%25`; `+` as it is), where the table's
# manifests name it as it is: the positions of the rows to delete are found all the same
@pytest.mark.parametrize("mor_folder", ["mor", "mor wh+100%"])
def test_merged_on_read_hours_give_the_tables_and_state_of_rewritten_ones(
    spark: SparkSession, tmp_path: Path, mor_folder: str
) -> None:
    cow, mor = twins(tmp_path, mor_folder)
    for i, evs in enumerate(mor_hours()):
        for c in (cow, mor):
            write_hour(c, hour(i), evs)
    merge_both(spark, (cow, mor), 0)
    assert_same(spark, cow, mor)
    assert deltas(mor) == 0  # a table's first hour writes its buckets whole

    r_cow, r_mor = merge_both(spark, (cow, mor), 1)
    assert_same(spark, cow, mor)
    same_counts(r_cow, r_mor)
    assert deltas(mor) == 4 and delete_files(mor) > 0
    assert r_mor["tables"]["s.a"]["published"]["files_removed"] == 0
    assert r_mor["tables"]["s.a"]["rows_after"] == r_cow["tables"]["s.a"]["rows_after"] == 80

    r_cow, r_mor = merge_both(spark, (cow, mor), 2)  # keys changed again: deltas stack
    assert_same(spark, cow, mor)
    same_counts(r_cow, r_mor)
    assert skipped(r_mor) == skipped(r_cow) == (1, 0, 6)
    assert deltas(mor) > 4

    # an hour merged again (a retry, a cleared run) finds every change already in
    r_cow, r_mor = merge_both(spark, (cow, mor), 2)
    assert skipped(r_mor) == skipped(r_cow) == (1, 6, 0)
    same_counts(r_cow, r_mor)
    assert_same(spark, cow, mor)
    before = load_manifest(mor)["tables"]["s.a"]["files"]
    assert all(len(f.get("deltas", [])) <= 2 for f in before.values())

    merge_both(spark, (cow, mor), 3)
    assert_same(spark, cow, mor)


def share_hours(cfgs: tuple[PipelineConfig, ...]) -> None:
    """Hour 0 inserts 80 keys (~20 a bucket); hours 1-3 each change the same fifth of them,
    and hour 3 also brings hour 1's changes again."""
    h0 = [event(k + 1, "s.a", "insert", None, {"id": k, "v": "a"}, T) for k in range(KEYS)]
    for c in cfgs:
        write_hour(c, hour(0), h0)
        for i in (1, 2, 3):
            changed = [up(1000 * i + k, k, f"v{i}", "x") for k in range(KEYS) if k % 5 == 0]
            # hour 3 also brings hour 1's changes again: older than the deltas of hour 2
            again = [up(1000 + k, k, "v1", "x") for k in range(KEYS) if k % 5 == 0]
            write_hour(c, hour(i), changed + (again if i == 3 else []))


def test_buckets_are_rewritten_once_their_deltas_pass_their_share(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Changing a fifth of every bucket's keys an hour, the third hour's deltas would pass
    half of the buckets' base: it rewrites every bucket whole, deltas and deletes gone."""
    cow, mor = twins(tmp_path)
    share_hours((cow, mor))
    merge_both(spark, (cow, mor), 0)
    merge_both(spark, (cow, mor), 1)
    assert deltas(mor) == 4
    merge_both(spark, (cow, mor), 2)
    assert deltas(mor) == 8 and delete_files(mor) > 0
    r_cow, r_mor = merge_both(spark, (cow, mor), 3)
    assert deltas(mor) == 0 and delete_files(mor) == 0
    assert r_mor["tables"]["s.a"]["published"]["files_removed"] > 0
    # a key has rows in a bucket's base and in its deltas: its newest is what a change is
    # stale against (each of hour 1's changes is counted once)
    assert skipped(r_mor) == skipped(r_cow) == (16, 0, 16)
    assert_same(spark, cow, mor)


def test_an_hour_changing_most_keys_rewrites_its_buckets_at_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    """An hour changing more keys than half of its buckets' base would add deltas the next
    hour rewrites anyway: it rewrites the buckets itself (cheaper: no old rows to look up, no
    delete files), and the tables are still those of the rewriting pipeline. An hour changing
    fewer adds deltas."""
    cow, mor = twins(tmp_path)
    h0 = [event(k + 1, "s.a", "insert", None, {"id": k, "v": "a"}, T) for k in range(KEYS)]
    most = [up(1000 + k, k, "b", "a") for k in range(KEYS) if k % 5 < 3]  # three fifths
    few = [up(2000 + k, k, "c", "b") for k in range(KEYS) if k % 5 == 0]
    for c in (cow, mor):
        write_hour(c, hour(0), h0)
        write_hour(c, hour(1), most)
        write_hour(c, hour(2), few)
    merge_both(spark, (cow, mor), 0)
    r_cow, r_mor = merge_both(spark, (cow, mor), 1)
    assert deltas(mor) == 0 and delete_files(mor) == 0
    assert r_mor["tables"]["s.a"]["published"]["files_removed"] > 0
    assert skipped(r_mor) == skipped(r_cow) == (0, 0, 48)
    assert_same(spark, cow, mor)
    merge_both(spark, (cow, mor), 2)
    assert deltas(mor) == 4 and delete_files(mor) > 0
    assert_same(spark, cow, mor)


def test_rollback_and_expire_keep_what_the_deltas_and_deletes_need(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Expired to two hours, then rolled back past the hour that rewrote the buckets, the
    state is hour 2's (its deltas kept by expire) and the table reads hour 2's rows (its delete
    files restored with its data files); merged forward again it is the same as a pipeline
    that never rolled back. A saved state that lost a delta folder is not restored."""
    cow, mor = twins(tmp_path)
    share_hours((cow, mor))
    for i in range(4):
        merge_both(spark, (cow, mor), i)
    assert deltas(mor) == 0
    expire(mor, keep_hours=2)
    H2 = format_hour(hour(2))
    rollback(str(mor.source_file), H2)
    assert list(export_rows(mor, "s.a")) == list(export_rows(cow, "s.a", hour=H2))
    assert deltas(mor) == 8 and delete_files(mor) > 0
    merge_hour(spark, mor, hour(3), buckets=4)
    assert_same(spark, cow, mor)
    for h in (2, 3):  # the versions kept read as they did
        at = format_hour(hour(h))
        assert list(export_rows(mor, "s.a", hour=at)) == list(export_rows(cow, "s.a", hour=at))
    saved = load_manifest(mor)  # hour 3's state, saved: its deltas are gone, not lost
    lost = next(
        d["path"]
        for f in json.loads(mor.layout.saved_manifest(H2).read_text())["tables"]["s.a"][
            "files"
        ].values()
        for d in f.get("deltas", [])
    )
    shutil.rmtree(mor.layout.merge / lost)
    with pytest.raises(NoSavedStateError, match="lost"):
        rollback(str(mor.source_file), H2)
    assert load_manifest(mor) == saved


def test_an_hour_stopped_at_any_point_and_merged_again_converges(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped before its commit, a merge-on-read hour leaves the version before; stopped
    after it (the table's new rows and deletes committed, the state's manifest not), the new
    version. Merged again, it finds the rows to replace by key in the table as it is: the
    keys new to the state, published by the stopped attempt, are replaced too, not doubled."""
    cow, mor = twins(tmp_path)
    h = mor_hours()
    for c in (cow, mor):
        for i in (0, 1):
            write_hour(c, hour(i), h[i])
    merge_both(spark, (cow, mor), 0)
    merge_hour(spark, cow, hour(1), buckets=4)
    at_0, at_1 = list(export_rows(mor, "s.a")), list(export_rows(cow, "s.a"))
    for point in POINTS:

        def stop(name: str, point: str = point) -> None:
            if name == point:
                raise RuntimeError(f"stopped at {point}")

        monkeypatch.setattr("recon.merge.stage.checkpoint", stop)
        monkeypatch.setattr("recon.publish.iceberg.checkpoint", stop)
        with pytest.raises(RuntimeError, match=point):
            merge_hour(spark, mor, hour(1), buckets=4)
        committed = point == "merge:published"
        assert list(export_rows(mor, "s.a")) == (at_1 if committed else at_0), point
        assert load_manifest(mor)["hours"] == [format_hour(hour(0))], point
    monkeypatch.undo()
    merge_hour(spark, mor, hour(1), buckets=4)
    assert_same(spark, cow, mor)


def _published_texts(cfg: PipelineConfig, name: str) -> list[tuple[Any, ...]]:
    """The table's rows as `state_tables` gives them: sorted (column, text) items."""
    return sorted(
        tuple(sorted((k, str(v)) for k, v in r.items() if v is not None))
        for r in export_rows(cfg, name)
    )


@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(events=change_streams(), cuts=st.lists(st.integers(0, 100), min_size=2, max_size=3))
def test_merged_on_read_hours_are_idempotent_and_independent_of_their_order(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    events: list[dict[str, Any]],
    cuts: list[int],
) -> None:
    """`test_merge`'s property, merged on read and published: a random change stream split
    into hours, merged in order, then every hour again in reverse order (re-runs, backfills):
    the state and the published table are the stream's end state every time. The buckets are
    never due for a rewrite here (their few keys would be after every hour), so deltas and
    deletes stack over every hour after the first."""
    monkeypatch.setattr("recon.merge.manifest.COMPACT_SHARE", 1e9)
    expected = oracle(events)
    shutil.rmtree(tmp_path / "p", ignore_errors=True)
    cfg = pipeline(
        tmp_path / "p", {"s.a": {"primary_key": ["id"]}, "s.b": {}}, write_mode="merge-on-read"
    )
    split = split_hours(events, cuts)
    for i, evs in enumerate(split):
        write_hour(cfg, hour(i), evs)
    applied_later = 0  # changes applied to the keyed table once its state had started
    for order in (list(range(len(split))), list(reversed(range(len(split))))):
        for i in order:
            entry = load_manifest(cfg)["tables"].get("s.a")
            started = bool(entry and entry["files"])
            r = merge_hour(spark, cfg, hour(i), buckets=4)
            applied_later += r["tables"]["s.a"]["applied"] if started else 0
        assert state_tables(spark, cfg) == expected
        assert _published_texts(cfg, "s.a") == expected["s.a"]
    assert (deltas(cfg) > 0) == (applied_later > 0)  # those hours were merged on read
