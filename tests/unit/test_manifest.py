"""Issue 12 item 4: a missing or unreadable manifest while tables are published is an error
naming the fix, never an empty state that replaces every table by one hour's rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from recon.errors import ManifestError
from recon.hours import parse_hour
from recon.merge.manifest import (
    MAX_DELTAS,
    BucketFile,
    DeltaFile,
    TableEntry,
    cheaper_rewritten,
    checks_digest,
    checks_needed,
    due_for_compaction,
    empty_manifest,
    load_manifest,
    merged_hours,
    reset_state,
    save_manifest,
)
from recon.merge.stage import check_state_matches_tables, hours_missing
from recon.publish.iceberg import get_catalog
from tests.support.builders import pipeline

H = "2026-01-01T03"


def test_a_lost_manifest_with_state_left_names_recon_rebuild(tmp_path: Path) -> None:
    cfg = pipeline(tmp_path, {"s.a": {}})
    assert load_manifest(cfg) == empty_manifest()  # never merged: nothing to lose
    man = empty_manifest() | {"version": 3, "hours": [H]}
    save_manifest(cfg, man, hour=parse_hour(H))  # type: ignore[arg-type]
    cfg.layout.manifest.unlink()
    with pytest.raises(
        ManifestError, match=f"missing, but the merge state of 1 hour.*last {H}.*recon rebuild"
    ):
        load_manifest(cfg)
    assert reset_state(cfg)["version"] == 1  # the fix works without it
    cfg.layout.manifest.write_text('{"version": 4, "tab')
    with pytest.raises(ManifestError, match="cannot be read .*recon rebuild"):
        load_manifest(cfg)


def test_a_published_table_without_any_manifest_is_not_merged_over(tmp_path: Path) -> None:
    cfg = pipeline(tmp_path, {"s.a": {}})
    check_state_matches_tables(cfg, empty_manifest(), ["s.a"], H)  # nothing published yet
    cat = get_catalog(cfg)
    cat.create_namespace_if_not_exists(("t", "s"))
    schema = pa.schema([("id", pa.int64())])
    table = cat.create_table(("t", "s", "a"), schema=schema)
    rows = pa.Table.from_pylist([{"id": 1}], schema=schema)
    table.append(rows, snapshot_properties={"recon.hour": H})
    # a first merge of H killed after its publish, run again: allowed
    check_state_matches_tables(cfg, empty_manifest(), ["s.a"], H)
    table.append(rows, snapshot_properties={"recon.hour": "2026-01-01T04"})
    with pytest.raises(ManifestError, match="s.a is published but .*manifest.json is missing"):
        check_state_matches_tables(cfg, empty_manifest(), ["s.a"], H)
    check_state_matches_tables(cfg, empty_manifest() | {"version": 1}, ["s.a"], H)  # rebuilt


def test_a_reset_of_some_tables_leaves_their_hours_to_merge_again(tmp_path: Path) -> None:
    """`recon rebuild --tables b` first drops b's state: until b has merged an hour again, the
    hour is merged for the other tables only, so a later hour's merge finds it missing for b
    (a rebuild stopped half-way leaves a gap the audit reports, not one nobody sees)."""
    cfg = pipeline(tmp_path, {"s.a": {}, "s.b": {}, "s.c": {}})
    h0, h1, h2 = "2026-01-01T00", "2026-01-01T01", "2026-01-01T02"
    tables = {t: {"files": {}} for t in cfg.tables}
    man = empty_manifest() | {"version": 1, "hours": [h0, h1], "tables": tables}
    man["partial_hours"] = {h1: ["s.a", "s.b"]}  # c has not merged h1 yet
    save_manifest(cfg, man)  # type: ignore[arg-type]
    new = reset_state(cfg, ["s.b"])
    assert new["partial_hours"] == {h0: ["s.a", "s.c"], h1: ["s.a"]}
    start, at = parse_hour(h0), parse_hour(h2)
    assert hours_missing(start, at, new["hours"], new["partial_hours"], ["s.a"]) == []
    assert hours_missing(start, at, new["hours"], new["partial_hours"], ["s.b"]) == [h0, h1]
    assert hours_missing(start, at, new["hours"], new["partial_hours"], ["s.c"]) == [h1]
    hours, partial = merged_hours(new, h0, ["s.b"], list(cfg.tables))  # the rebuild's first hour
    assert hours == [h0, h1] and partial == {h1: ["s.a"]}
    assert "partial_hours" not in reset_state(cfg)  # every table: nothing is merged


def test_written_rows_are_counted_where_a_value_that_does_not_fit_can_be() -> None:
    checks = [("n", "(row['n'] is not null and (try_cast(row['n'] as int)) is null)")]
    d = checks_digest(checks)
    assert d != checks_digest([]) and d != checks_digest([(c, b + " ") for c, b in checks])

    base = {"path": "p", "rows": 1, "state_rows": 1, "checksum": "0", "run_id": "r", "hour": H}
    records = [{"unfit_checks": d, "unfit_values": 0}, {"unfit_checks": d, "unfit_values": 2},
               {}, {"unfit_checks": "other", "unfit_values": 0}]  # fmt: skip
    files = {str(b): base | r for b, r in enumerate(records)}
    prev: TableEntry = {"buckets": 8, "files": files, "schema": {}}  # type: ignore[typeddict-item]
    assert not checks_needed(None, {0, 1}, d, False)  # a new table: only checked changes
    assert not checks_needed(prev, {0, 5}, d, False)  # fits, and a new bucket
    assert checks_needed(prev, {0, 5}, d, True)  # a schema change or a snapshot's rows
    assert checks_needed(prev, {0, 1}, d, False)  # bucket 1 holds values that do not fit
    assert checks_needed(prev, {2}, d, False)  # written before buckets kept their count
    assert checks_needed(prev, {3}, d, False)  # counted with other checks (types changed)
    assert not checks_needed(prev, set(), d, False)


def _bucket(base: int, deltas: list[int]) -> BucketFile:
    """A bucket of `base` rows rewritten, then deltas of these rows each."""
    d: list[DeltaFile] = [
        {"path": f"d{i}", "state_rows": n, "run_id": "r", "hour": H} for i, n in enumerate(deltas)
    ]
    rows = base + sum(deltas)
    return {"path": "b", "deltas": d, "rows": base, "state_rows": rows, "checksum": "0",
            "run_id": "r", "hour": H}  # fmt: skip


def test_a_bucket_is_compacted_once_its_deltas_pass_half_its_base_or_are_many() -> None:
    assert not due_for_compaction(_bucket(100, [30, 20]))  # half: not past it
    assert due_for_compaction(_bucket(100, [30, 21]))
    assert not due_for_compaction(_bucket(100, [1] * (MAX_DELTAS - 1)))
    assert due_for_compaction(_bucket(100, [1] * MAX_DELTAS))


def test_an_hour_is_rewritten_when_its_delta_would_pass_half_of_the_buckets_base() -> None:
    """Summed over the hour's buckets, deltas already there and the keys it changes."""
    files = [_bucket(100, [30]), _bucket(100, [])]
    assert not cheaper_rewritten(files, 70)  # 30 + 70 = half of 200
    assert cheaper_rewritten(files, 71)
    assert cheaper_rewritten([_bucket(10, [])], 6)
    assert not cheaper_rewritten([_bucket(1_000_000, [])], 1000)
