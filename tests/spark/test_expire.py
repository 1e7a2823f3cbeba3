"""`recon expire`: a window of versions and merge states is kept, older files are deleted, and
what remains still exports, rolls back and merges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recon.cli import main
from recon.hours import format_hour
from recon.merge.manifest import load_manifest
from recon.merge.stage import merge_hour
from recon.publish.export import export_rows
from recon.publish.iceberg import load_table, local_path
from tests.support.builders import pipeline
from tests.support.merge import T, event, hour, write_hour


def _parquet(folder: Path) -> set[Path]:
    return set(folder.rglob("*.parquet"))


def test_expire_keeps_the_window_and_frees_the_rest(spark, tmp_path: Path, capsys) -> None:
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}, "s.b": {"primary_key": ["id"]}})
    for i in range(4):  # every hour updates the same keys of s.a: each rewrites its buckets
        evs = [
            event(i * 10 + k, "s.a", "insert", None, {"id": k, "v": f"h{i}"}, T) for k in range(8)
        ]
        if i == 0:  # s.b changes in hour 0 only: its files of hour 0 stay current
            evs += [event(100 + k, "s.b", "insert", None, {"id": k, "v": "b"}, T) for k in range(3)]
        write_hour(cfg, hour(i), evs)
        merge_hour(spark, cfg, hour(i), buckets=4)
    rows = list(export_rows(cfg, "s.a"))
    b_rows = list(export_rows(cfg, "s.b"))
    table_data = local_path(load_table(cfg, "s.a").location(), cfg.layout.object_mirror) / "data"
    state_data = cfg.layout.merge_data
    files_before, state_before = _parquet(table_data), _parquet(state_data)
    h1_version = list(export_rows(cfg, "s.a", hour=format_hour(hour(1))))
    assert main(["expire", "--pipeline", str(cfg.source_file), "--keep-hours", "2"]) == 0
    out = capsys.readouterr().out
    assert "kept hours from 2026-01-01T02 on" in out and "2 saved hour states dropped" in out
    # the current table is intact; hours 2-3 stay readable and rollback-able, 0-1 are gone
    assert list(export_rows(cfg, "s.a")) == rows
    assert {
        s.summary.additional_properties["recon.hour"] for s in load_table(cfg, "s.a").snapshots()
    } == {
        format_hour(hour(2)),
        format_hour(hour(3)),
    }
    # the expired hours' tags went with their versions (a tag would have kept them)
    assert sorted(t for t in load_table(cfg, "s.a").refs() if t.startswith("hour-")) == [
        f"hour-{format_hour(hour(2))}",
        f"hour-{format_hour(hour(3))}",
    ]
    assert _parquet(table_data) < files_before and _parquet(state_data) < state_before
    a_state = {p for p in _parquet(state_data) if "_t=s.a" in str(p)}
    assert not any(format_hour(hour(0)) in str(p) for p in _parquet(table_data) | a_state)
    # what the current versions still use is kept, however old
    assert any(format_hour(hour(0)) in str(p) and "_t=s.b" in str(p) for p in _parquet(state_data))
    assert list(export_rows(cfg, "s.b")) == b_rows and len(b_rows) == 3
    assert (
        main(["rollback", "--pipeline", str(cfg.source_file), "--to-hour", format_hour(hour(1))])
        == 2
    )
    assert "no saved merge state for hour 2026-01-01T01" in capsys.readouterr().err
    assert (
        main(["rollback", "--pipeline", str(cfg.source_file), "--to-hour", format_hour(hour(2))])
        == 0
    )
    assert {r["v"] for r in export_rows(cfg, "s.a")} == {"h2"}
    # and the state left is whole: hour 3 merges again onto it
    merge_hour(spark, cfg, hour(3), buckets=4)
    assert list(export_rows(cfg, "s.a")) == rows
    assert load_manifest(cfg)["hours"][-1] == format_hour(hour(3))
    assert h1_version != rows  # (hour 1's version really was different, and is no longer kept)


def _rollback(cfg: Any, h: int) -> int:
    return main(["rollback", "--pipeline", str(cfg.source_file), "--to-hour", format_hour(hour(h))])


def test_expiry_keeps_the_version_a_kept_hour_needs_and_rollback_restores_it(
    spark, tmp_path: Path, capsys
) -> None:
    """s.b changes in hours 0 and 2 only: at the end of hour 1 (in a 2-hour window) its
    version is hour 0's. Expiring by hour label dropped it, and rollback to hour 1 then emptied
    s.b while the merge state said otherwise."""
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}, "s.b": {"primary_key": ["id"]}})
    at_end: list[list[dict[str, Any]]] = []
    for i in range(3):
        evs = [
            event(i * 10 + k, "s.a", "insert", None, {"id": k, "v": f"h{i}"}, T) for k in range(4)
        ]
        if i != 1:
            evs += [
                event(100 + i * 10 + k, "s.b", "insert", None, {"id": k, "v": f"b{i}"}, T)
                for k in range(3)
            ]
        write_hour(cfg, hour(i), evs)
        merge_hour(spark, cfg, hour(i), buckets=4)
        at_end.append(list(export_rows(cfg, "s.b")))
    assert main(["expire", "--pipeline", str(cfg.source_file), "--keep-hours", "2"]) == 0
    capsys.readouterr()
    assert _rollback(cfg, 1) == 0
    assert list(export_rows(cfg, "s.b")) == at_end[1] == at_end[0] and len(at_end[1]) == 3
    assert {r["v"] for r in export_rows(cfg, "s.a")} == {"h1"}


def _three_hours(spark: Any, cfg: Any) -> list[list[dict[str, Any]]]:
    """Hours 0-2 merged, each rewriting keys 0-3 of s.a; the table's rows after each."""
    versions = []
    for i in range(3):
        evs = [
            event(i * 10 + k, "s.a", "insert", None, {"id": k, "v": f"h{i}"}, T) for k in range(4)
        ]
        write_hour(cfg, hour(i), evs)
        merge_hour(spark, cfg, hour(i), buckets=4)
        versions.append(list(export_rows(cfg, "s.a")))
    return versions


def test_rollback_after_an_earlier_hour_is_merged_again_restores_that_hours_content(
    spark, tmp_path: Path, capsys
) -> None:
    """Hours 0-2 merged, then hour 1 merged again (a cleared run): its new version is labelled
    hour 1 but holds hour 2's changes; rolling back to hour 1 must undo hour 2."""
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}})
    versions = _three_hours(spark, cfg)
    merge_hour(spark, cfg, hour(1), buckets=4)  # the state (and table) still ends at hour 2
    assert list(export_rows(cfg, "s.a")) == versions[2]
    assert list(export_rows(cfg, "s.a", hour=format_hour(hour(1)))) == versions[1]
    assert _rollback(cfg, 1) == 0
    assert list(export_rows(cfg, "s.a")) == versions[1]
    assert load_manifest(cfg)["hours"] == [format_hour(hour(0)), format_hour(hour(1))]
    merge_hour(spark, cfg, hour(2), buckets=4)
    assert list(export_rows(cfg, "s.a")) == versions[2]


def test_rollback_refuses_when_the_hours_version_is_gone(spark, tmp_path: Path, capsys) -> None:
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}})
    _three_hours(spark, cfg)
    rows, man = list(export_rows(cfg, "s.a")), load_manifest(cfg)
    table = load_table(cfg, "s.a")
    h1 = load_manifest_at(cfg, 1)["tables"]["s.a"]["snapshot_id"]
    # gone by another tool (which has to drop the hour's tag first: a tag keeps its version)
    table.manage_snapshots().remove_tag("hour-2026-01-01T01").commit()
    load_table(cfg, "s.a").maintenance.expire_snapshots().by_ids([h1]).commit()
    capsys.readouterr()
    assert _rollback(cfg, 1) == 2
    err = capsys.readouterr().err
    assert f"snapshot {h1}) is no longer in its history" in err and "nothing was changed" in err
    assert "Traceback" not in err
    assert list(export_rows(cfg, "s.a")) == rows and load_manifest(cfg) == man


def load_manifest_at(cfg: Any, h: int) -> Any:
    import json

    return json.loads(cfg.layout.saved_manifest(hour(h)).read_text())


def test_expire_keeps_a_version_a_users_tag_or_branch_holds_and_says_so(
    spark, tmp_path: Path, capsys
) -> None:
    """Issue 79 item 9: Iceberg refuses to expire a version a tag or branch names, and expire
    failed for good on every later run once a user had tagged an old version."""
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}})
    for i in range(4):
        write_hour(cfg, hour(i), [event(i, "s.a", "insert", None, {"id": 1, "v": f"h{i}"}, T)])
        merge_hour(spark, cfg, hour(i), buckets=2)
    table = load_table(cfg, "s.a")
    by_hour = {
        s.summary.additional_properties["recon.hour"]: s.snapshot_id for s in table.snapshots()
    }
    table.manage_snapshots().create_tag(by_hour[format_hour(hour(0))], "audit-2026").commit()
    table.manage_snapshots().create_branch(by_hour[format_hour(hour(1))], "fixes").commit()
    assert main(["expire", "--pipeline", str(cfg.source_file), "--keep-hours", "1"]) == 0
    out = capsys.readouterr().out
    assert "kept the versions your refs audit-2026, fixes hold" in out
    left = {s.snapshot_id for s in load_table(cfg, "s.a").snapshots()}
    assert by_hour[format_hour(hour(0))] in left and by_hour[format_hour(hour(1))] in left
    assert by_hour[format_hour(hour(2))] not in left  # the rest expired
    assert main(["expire", "--pipeline", str(cfg.source_file), "--keep-hours", "1"]) == 0
