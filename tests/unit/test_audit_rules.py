"""The audit's rules as pure functions: counts in, findings, identity and verdict out (no Spark,
no files). The Spark tests in tests/spark/test_audit.py inject the same faults into real dumps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from recon.audit import rules
from recon.config import AuditConfig
from recon.decode.stats import DecodeCounters
from recon.merge.result import MergeResult, TableMerge

END = datetime(2026, 1, 1, 1, tzinfo=UTC)


def _dec(**totals: int) -> DecodeCounters:
    return {
        "pipeline": "p",
        "hour": "2026-01-01T00",
        "run_id": "r",
        "format": "canal_json",
        "previous_hour_decoded": True,
        "carried_in_available": False,
        "totals": dict(totals),
        "events_by_op": {"insert": 3},
        "ddl": [],
        "quarantine_reasons": {"not JSON": totals.get("records_quarantined", 0)},
        "partitions": [],
    }


def _table(changes: int = 3, applied: int = 3, **extra: Any) -> TableMerge:
    t: dict[str, Any] = {
        "rows_before": 0,
        "rows_after": applied,
        "checksum": "1",
        "changes_by_op": {"insert": changes},
        "entered_by_op": {"insert": applied},
        "applied": applied,
        "pk_changes": 0,
        "snapshot_rows_loaded": 0,
        "skipped": {"below_snapshot_watermark": 0, "stale": 0, "already_applied": 0},
        "not_comparable_to_watermark": 0,
        "ddl_seen": 0,
        "schema_version": 1,
        "schema_changed": False,
        "buckets_touched": 1,
        "buckets": 4,
        "primary_key": ["id"],
        "published": {"committed": True, "snapshot_id": 1},
    }
    t.update(extra)
    return t  # type: ignore[return-value]


def _mer(tables: dict[str, TableMerge], **extra: Any) -> MergeResult:
    m: dict[str, Any] = {
        "pipeline": "p",
        "hour": "2026-01-01T00",
        "run_id": "r",
        "tables": tables,
        "merged_tables": list(tables),
        "not_merged": {},
        "ddl_not_merged": 0,
        "not_configured": {},
        "ddl_not_configured": 0,
        "snapshot": None,
    }
    m.update(extra)
    return m  # type: ignore[return-value]


def test_holes_and_gaps_inside_and_between_hours() -> None:
    assert rules.holes([(0, 3), (6, 9)], 0, 9) == [(4, 5)]
    assert rules.holes([], 5, 7) == [(5, 7)]
    g = rules.offset_gaps(runs=[(12, 20), (25, 30)], earlier=[(0, 9)])
    assert g["inside"] == [(21, 24)]
    assert g["between_hours"] == (10, 11)
    assert g["previous_last_offset"] == 9
    # a gap of an earlier hour that this hour does not fill stays open
    assert rules.offset_gaps(runs=[(20, 21)], earlier=[(0, 3), (8, 19)])["earlier_still_open"] == [
        (4, 7)
    ]


def test_partition_findings_name_the_partition() -> None:
    p = {
        "topic": "t",
        "partition": 2,
        "records": 10,
        "bytes": 100,
        "min_offset": 12,
        "max_offset": 30,
        "duplicates_in_hour": 1,
        "duplicates_cross_hour": 2,
        "decoder": {},
    }
    row, found = rules.partition_report(p, rules.offset_gaps([(12, 20), (25, 30)], [(0, 9)]))  # type: ignore[arg-type]
    assert row["offsets_missing"] == 4 and row["gap_from_previous_hour"] == [10, 11]
    assert [(f["kind"], f.get("partition")) for f in found] == [
        ("offset_gap", 2),
        ("offset_gap", 2),
        ("duplicate", 2),
    ]
    assert "3 records delivered more than once" in found[2]["message"]


def test_an_offset_reset_is_a_finding_that_fails_by_default() -> None:
    p = {
        "topic": "t",
        "partition": 0,
        "records": 5,
        "bytes": 50,
        "min_offset": 0,
        "max_offset": 4,
        "duplicates_in_hour": 0,
        "duplicates_cross_hour": 0,
        "offset_resets": 5,
        "decoder": {},
    }
    row, found = rules.partition_report(p, rules.offset_gaps([(0, 4)], []))  # type: ignore[arg-type]
    assert row["offset_resets"] == 5
    assert [f["kind"] for f in found] == ["offset_reset"]
    assert "acknowledge" in found[0]["message"]
    verdict, _ = rules.judge(found, AuditConfig().fail_on)
    assert verdict == "fail"


def test_decoding_findings() -> None:
    dec = _dec(records_quarantined=2, segments_orphaned=1, seq_gaps=1, seq_missing=4)
    found = rules.decoding_findings(dec, open_age_hours=3.5, open_limit_hours=3)
    assert [f["kind"] for f in found] == [
        "quarantined",
        "orphan_segment",
        "seq_gap",
        "open_transaction",
    ]
    assert "not JSON (2)" in found[0]["message"] and "4 entries missing" in found[2]["message"]
    assert rules.decoding_findings(_dec(), open_age_hours=2.0, open_limit_hours=3) == []


def test_gtid_gaps_inside_and_since_the_previous_hour() -> None:
    spans: dict[str, rules.GtidSpan] = {"u1": {"first": 8, "last": 12, "distinct": 4}}
    gtid, found = rules.gtid_report(spans, {"u1": {"last": 5}})
    assert gtid["u1"]["missing_inside"] == 1 and gtid["u1"]["missing_since_previous_hour"] == 2
    assert [f["kind"] for f in found] == ["gtid_gap", "gtid_gap"]
    assert (
        rules.gtid_report({"u1": {"first": 6, "last": 7, "distinct": 2}}, {"u1": {"last": 5}})[1]
        == []
    )


def test_the_identity_balances_and_each_broken_link_is_named() -> None:
    dec = _dec(records=5, records_in=4, duplicates_in_hour=1, records_carried_out=1)
    tables = {"s.t": rules.table_report("s.t", _table(), None, END)[0]}
    links, found = rules.identity(dec, _mer({"s.t": _table()}), tables)
    assert links["balanced"] and found == []
    # a record read but not counted anywhere
    links, found = rules.identity(_dec(records=6, records_in=4, duplicates_in_hour=1), _mer({}), {})
    assert not links["balanced"] and "records" in found[0]["message"]
    # an event decoded that the merge never saw
    links, found = rules.identity(_dec(records=4, records_in=4), _mer({}), {})
    assert links["events"] == {
        "decoded": 3,
        "merged": 0,
        "not_configured": {},
        "not_merged": {},
        "balanced": False,
    }
    # a table whose changes are neither applied nor skipped
    row, _ = rules.table_report("s.t", _table(changes=3, applied=2), None, END)
    assert row["balanced"] is False
    links, found = rules.identity(
        _dec(records=4, records_in=4), _mer({"s.t": _table()}), {"s.t": row}
    )
    assert found[0]["kind"] == "balance" and "table s.t" in found[0]["message"]


def test_uncastable_values_and_duplicate_keys_are_findings() -> None:
    pub = {"committed": True, "snapshot_id": 1, "uncastable": {"qty": 2}, "duplicate_keys": 1}
    _, found = rules.table_report("s.t", _table(published=pub), None, END)
    assert [f["kind"] for f in found] == ["balance", "quarantined"]
    assert all(f["table"] == "s.t" for f in found)


def test_a_type_conflict_is_a_type_change_finding_and_a_promotion_is_not() -> None:
    promoted = ["v2: type n int32 -> int64 (image)"]
    row, found = rules.table_report("s.t", _table(schema_changes=promoted), None, END)
    assert row["schema_changes"] == promoted and not found
    conflict = [*promoted, "v2: type conflict k: int32 vs json (image)"]
    _, found = rules.table_report("s.t", _table(schema_changes=conflict), None, END)
    assert [f["kind"] for f in found] == ["type_change"]
    assert "k: int32 vs json" in found[0]["message"] and "keeps its type" in found[0]["message"]


def test_staleness_and_the_verdict() -> None:
    assert rules.staleness(_dec(records=0), None, END)[0]["kind"] == "stale"
    assert rules.staleness(_dec(records=0, heartbeats=1), None, END) == []
    old = int(END.timestamp() * 1000) - 3 * 3600_000
    assert rules.staleness(_dec(records=1), old, END)[0]["kind"] == "stale"
    found = [rules.finding("duplicate", "x"), rules.finding("stale", "y")]
    assert rules.judge(found, ["offset_gap"]) == (
        "warn",
        ["balance", "offset_gap", "unreadable_ddl"],
    )
    assert [f["severity"] for f in found] == ["warn", "warn"]
    assert rules.judge([rules.finding("balance", "z")], [])[0] == "fail"  # always fails
    assert rules.judge([], ["stale"])[0] == "pass"


def test_tagged_gtid_sets_parse_per_source() -> None:
    from recon.core.order import gtid_number
    from recon.core.watermark import parse_gtid_set

    u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    mysql, mariadb = parse_gtid_set(f"{u.upper()}:1-5:7:Big_Load:1-3,0-1-9", "w")
    assert mysql == {u: ((1, 5), (7, 7)), f"{u}:big_load": ((1, 3),)} and mariadb == {0: 9}
    assert gtid_number(f"{u}:big_load:42") == 42


def test_hours_out_of_order_are_findings() -> None:
    from datetime import timedelta

    from recon.merge.stage import hours_missing

    start = datetime(2026, 1, 1, 0, tzinfo=UTC)
    merged = ["2026-01-01T00", "2026-01-01T02"]
    assert hours_missing(start, start + timedelta(hours=4), merged) == [
        "2026-01-01T01",
        "2026-01-01T03",
    ]
    assert hours_missing(start, start, []) == []
    # an hour merged for some tables only is missing for the others
    partial = {"2026-01-01T00": ["s.a"]}
    t2 = start + timedelta(hours=2)
    assert hours_missing(start, t2, merged, partial, ["s.a"]) == ["2026-01-01T01"]
    assert hours_missing(start, t2, merged, partial, ["s.a", "s.b"]) == [
        "2026-01-01T00",
        "2026-01-01T01",
    ]

    in_order = _dec(records_carried_in=2)
    in_order["previous_carried_out"] = 2
    assert rules.order_findings(in_order, _mer({}), first_hour=False) == []

    not_decoded = _dec()
    not_decoded["previous_hour_decoded"] = False
    assert rules.order_findings(not_decoded, _mer({}), first_hour=True) == []  # nothing before
    (f,) = rules.order_findings(not_decoded, _mer({}), first_hour=False)
    assert f["kind"] == "hour_order" and "not decoded first" in f["message"]

    carry_lost = _dec(records_carried_in=0)
    carry_lost["previous_carried_out"] = 3
    (f,) = rules.order_findings(carry_lost, _mer({}), first_hour=False)
    assert "carried out 3 records but 0 came in" in f["message"]

    early = _mer({}, hours_missing_before=["2026-01-01T01"], hours_missing_count=30)
    (f,) = rules.order_findings(_dec(), early, first_hour=False)
    assert "30 earlier hours were not merged" in f["message"] and "29 more" in f["message"]
    verdict, _ = rules.judge([f], ["hour_order"])
    assert verdict == "fail"


def test_a_jdbc_url_is_shown_without_its_credentials() -> None:
    """Issue 79 item 9: reports kept `user:password@` of the URL given to `--jdbc`."""
    from recon.audit.reconcile import shown_url

    assert shown_url("jdbc:mariadb://u:secret@h:3306/db?password=x") == "jdbc:mariadb://h:3306/db"
    assert shown_url("jdbc:postgresql://u:p@ss@db:5432/x") == "jdbc:postgresql://db:5432/x"
    assert shown_url("jdbc:mysql://h:3306/db") == "jdbc:mysql://h:3306/db"


def test_a_topics_settings_explain_its_markers_and_compaction_not_a_loss() -> None:
    """Issue 79 item 3: gaps of one offset on a transactional topic are commit markers; any
    gap on a compacted topic is compaction; what is left is a loss."""
    g = rules.offset_gaps([(0, 3), (5, 8), (11, 15), (17, 20)], [(-5, -2)])
    assert g["inside"] == [(4, 4), (9, 10), (16, 16)] and g["between_hours"] == (-1, -1)
    plain, none = rules.expected_gaps(g, False, False)
    assert plain == g and none == {"transaction_markers": 0, "compacted_offsets": 0}
    tx, counts = rules.expected_gaps(g, True, False)
    assert tx["inside"] == [(9, 10)] and tx["between_hours"] is None
    assert counts == {"transaction_markers": 3, "compacted_offsets": 0}
    compacted, counts = rules.expected_gaps(g, False, True)
    assert compacted["inside"] == [] and counts["compacted_offsets"] == 5
    both, counts = rules.expected_gaps(g, True, True)
    assert both["inside"] == [] and counts == {"transaction_markers": 3, "compacted_offsets": 2}
