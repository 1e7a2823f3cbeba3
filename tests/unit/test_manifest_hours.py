"""Which hours the merge state holds for which tables: a run limited to some tables (`--tables`,
the DAG's `tables` param) leaves an hour merged for those only, and the next hours' reports must
say so for the others (the audit's hour_order finding)."""

from __future__ import annotations

from recon.merge.manifest import Manifest, copy_manifest, empty_manifest, merged_hours

ALL = ["s.a", "s.b", "s.c"]


def _after(man: Manifest, H: str, names: list[str]) -> Manifest:
    new = copy_manifest(man)
    new["hours"], new["partial_hours"] = merged_hours(man, H, names, ALL)
    return new


def test_an_hour_is_partial_until_every_table_is_merged() -> None:
    man = _after(empty_manifest(), "2026-01-01T00", ["s.a"])
    assert man["hours"] == ["2026-01-01T00"]
    assert man["partial_hours"] == {"2026-01-01T00": ["s.a"]}
    man = _after(man, "2026-01-01T00", ["s.c"])
    assert man["partial_hours"] == {"2026-01-01T00": ["s.a", "s.c"]}
    man = _after(man, "2026-01-01T00", ["s.b"])
    assert man["partial_hours"] == {} and man["hours"] == ["2026-01-01T00"]


def test_a_full_merge_stays_full_when_one_table_is_merged_again() -> None:
    man = _after(empty_manifest(), "2026-01-01T00", ALL)
    assert man["partial_hours"] == {}
    man = _after(man, "2026-01-01T00", ["s.b"])
    assert man["partial_hours"] == {}
    # a manifest written before partial hours were kept: its hours count as merged for all
    legacy = empty_manifest()
    legacy["hours"] = ["2026-01-01T00"]
    assert _after(legacy, "2026-01-01T00", ["s.a"])["partial_hours"] == {}
    assert _after(legacy, "2026-01-01T01", ["s.a"])["partial_hours"] == {"2026-01-01T01": ["s.a"]}
