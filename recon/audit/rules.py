"""The audit's rules: pure functions from the counts the stages left to findings, the
conservation identity and a verdict (no Spark, no files: `recon.audit.facts` reads, this judges).

The identity is checked as a chain, each link from counts made independently:
1. records read = distinct + duplicates (in the hour, and of earlier hours);
2. distinct + carried in = consumed + carried out + quarantined, each counted by the stream
   driver as records leave the decoders: consumed = used for events, control entries or a
   reassembled group; a record a decoder let go any other way is `lost` (kept in quarantine,
   counted apart), so the link does not balance (hours decoded before consumption was counted
   derive it as the remainder, and say so);
3. events decoded = events the merge saw (configured tables + not configured + DDL);
4. per table: changes = applied + skipped (below snapshot watermark, stale, already applied).
A link that does not hold is a `balance` finding, and always fails the hour.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from recon.core.findings import FindingKind, Severity, Verdict
from recon.decode.stats import Stat

if TYPE_CHECKING:
    from recon.decode.stats import DecodeCounters, PartitionCounters
    from recon.merge.result import MergeResult, TableMerge

ALWAYS_FAILS: frozenset[str] = frozenset({"balance", "unreadable_ddl"})
MAX_LISTED_GAPS = 50
STALE_AFTER_SECONDS = 7200

Run = tuple[int, int]
PartitionKey = tuple[str, int]


class Finding(TypedDict):
    kind: FindingKind
    message: str
    severity: NotRequired[Severity]
    table: NotRequired[str]
    topic: NotRequired[str]
    partition: NotRequired[int]
    acknowledged: NotRequired[str]
    """The hour an operator acknowledged it from (`recon acknowledge-reset`): it warns."""


def finding(kind: FindingKind, message: str, **where: Any) -> Finding:
    f: Finding = {"kind": kind, "message": message}
    f.update(where)  # type: ignore[typeddict-item]
    return f


# -- offsets ---------------------------------------------------------------------------------
class OffsetGaps(TypedDict):
    inside: list[Run]
    between_hours: Run | None
    earlier_still_open: list[Run]
    previous_last_offset: int | None


def holes(runs: Iterable[Run], lo: int, hi: int) -> list[Run]:
    """Offsets in [lo, hi] no run covers, as inclusive ranges."""
    out = []
    nxt = lo
    for a, b in sorted(runs):
        if b < nxt:
            continue
        if a > nxt:
            out.append((nxt, min(a - 1, hi)))
        nxt = max(nxt, b + 1)
        if nxt > hi:
            break
    if nxt <= hi:
        out.append((nxt, hi))
    return [(a, b) for a, b in out if a <= b]


def offset_gaps(runs: list[Run], earlier: list[Run]) -> OffsetGaps:
    """For one partition read this hour (its offset runs, and earlier hours' runs): gaps inside
    the hour's offset range, the gap between the previous hours' last offset and this hour's
    first, and gaps of earlier hours still open."""
    lo, hi = min(a for a, _ in runs), max(b for _, b in runs)
    upto = earlier + runs
    prev_hi = max((b for _, b in earlier), default=None)
    first = min(a for a, _ in upto)
    all_holes = holes(upto, first, max(hi, prev_hi or hi))
    after_prev = prev_hi if prev_hi is not None else -1
    inside = [g for g in all_holes if g[0] > after_prev and g[1] <= hi]
    between = None
    if prev_hi is not None and lo > prev_hi + 1:
        g = (prev_hi + 1, lo - 1)
        if any(a <= g[0] and b >= g[1] for a, b in all_holes):
            between = g
            inside = [x for x in inside if x != g]
    still_open = [g for g in all_holes if prev_hi is not None and g[1] <= prev_hi]
    return {
        "inside": inside,
        "between_hours": between,
        "earlier_still_open": still_open,
        "previous_last_offset": prev_hi,
    }


def expected_gaps(
    g: OffsetGaps, transactional: bool, compacted: bool
) -> tuple[OffsetGaps, dict[str, int]]:
    """The gaps a topic's own settings explain, taken out of `g`, and their offsets counted:
    on a transactional topic a gap of one offset is a transaction's commit or abort marker,
    which the log holds and no consumer receives (`transaction_markers`); on a compacted topic
    any other gap is records compaction removed (`compacted_offsets`). What is left is a loss
    (`offset_gap`): on a transactional topic a gap of two offsets or more (records missing, or
    an aborted transaction's records that a read_committed dumper skips: the dump cannot tell
    which)."""
    counts = {"transaction_markers": 0, "compacted_offsets": 0}
    if not (transactional or compacted):
        return g, counts

    def lost(gaps: list[Run]) -> list[Run]:
        out = []
        for a, b in gaps:
            if transactional and a == b:
                counts["transaction_markers"] += 1
            elif compacted:
                counts["compacted_offsets"] += b - a + 1
            else:
                out.append((a, b))
        return out

    between = lost([g["between_hours"]]) if g["between_hours"] else []
    inside = lost(g["inside"])
    still_open = [
        x for x in g["earlier_still_open"] if not (transactional and x[0] == x[1]) and not compacted
    ]
    return {
        **g,
        "inside": inside,
        "between_hours": between[0] if between else None,
        "earlier_still_open": still_open,
    }, counts


NO_GAPS: OffsetGaps = {
    "inside": [],
    "between_hours": None,
    "earlier_still_open": [],
    "previous_last_offset": None,
}


def partition_report(
    p: PartitionCounters,
    g: OffsetGaps,
    reset_acknowledged: str | None = None,
    expected: dict[str, int] | None = None,
) -> tuple[dict[str, Any], list[Finding]]:
    """One partition's input row of the report, and its offset and duplicate findings;
    `reset_acknowledged`: the hour of an offset reset an operator acknowledged for the
    partition (its `offset_reset` finding then warns); `expected`: the offsets of gaps the
    topic's settings explain (`expected_gaps`), counted in the row."""
    missing_inside = sum(b - a + 1 for a, b in g["inside"])
    row = {
        "topic": p["topic"],
        "partition": p["partition"],
        "records": p.get("records", 0),
        "bytes": p.get("bytes", 0),
        "first_offset": p.get("min_offset"),
        "last_offset": p.get("max_offset"),
        "duplicates_in_hour": p.get("duplicates_in_hour", 0),
        "duplicates_of_earlier_hours": p.get("duplicates_cross_hour", 0),
        "offset_resets": p.get("offset_resets", 0),
        "offset_gaps": [list(x) for x in g["inside"][:MAX_LISTED_GAPS]],
        "offsets_missing": missing_inside,
        "gap_from_previous_hour": list(g["between_hours"]) if g["between_hours"] else None,
        "earlier_gaps_still_open": len(g["earlier_still_open"]),
        **(expected or {}),
        "decoder": p.get("decoder", {}),
    }
    where = {"topic": p["topic"], "partition": p["partition"]}
    out = []
    if g["inside"]:
        first = g["inside"][0]
        out.append(
            finding(
                "offset_gap",
                f"{missing_inside} offsets missing inside the hour in {len(g['inside'])} gap(s), "
                f"first {first[0]}..{first[1]}",
                **where,
            )
        )
    if g["between_hours"]:
        a, b = g["between_hours"]
        out.append(
            finding(
                "offset_gap",
                f"offsets {a}..{b} missing between the previous hour's last offset and this "
                "hour's first",
                **where,
            )
        )
    dups = p.get("duplicates_in_hour", 0) + p.get("duplicates_cross_hour", 0)
    if dups:
        out.append(
            finding("duplicate", f"{dups} records delivered more than once (dropped)", **where)
        )
    if p.get("offset_resets"):
        out.append(_reset_finding(p, reset_acknowledged))
    return row, out


def _reset_finding(p: PartitionCounters, acknowledged: str | None) -> Finding:
    """A partition's offset resets: acknowledged from an hour on (it warns), or not."""
    where = {"topic": p["topic"], "partition": p["partition"]}
    n = p.get("offset_resets", 0)
    if acknowledged:
        return finding(
            "offset_reset",
            f"{n} records at offsets read before with other content: the reset acknowledged "
            f"from hour {acknowledged} on (decoded as new records)",
            acknowledged=acknowledged,
            **where,
        )
    return finding(
        "offset_reset",
        f"{n} records at offsets read before with other content (the topic was re-created or "
        "moved?): they were decoded and merged as new records, not dropped as duplicates. If "
        "the reset is expected, acknowledge it once: `recon acknowledge-reset --topic "
        f"{p['topic']} --partition {p['partition']} --hour <this hour>`, then clear the "
        "hour's audit; if not, find what rewrote the topic before trusting the hour",
        **where,
    )


# -- decoding --------------------------------------------------------------------------------
def decoding_findings(
    dec: DecodeCounters, open_age_hours: float | None, open_limit_hours: int
) -> list[Finding]:
    """Quarantine, orphan segments, sequence gaps, transactions open too long."""
    tot = dec["totals"]
    out = []
    quarantined = int(tot.get(Stat.RECORDS_QUARANTINED, 0))
    if quarantined:
        reasons = sorted(dec.get("quarantine_reasons", {}).items())
        out.append(
            finding(
                "quarantined",
                f"{quarantined} records quarantined: "
                + ", ".join(f"{r} ({n})" for r, n in reasons),
            )
        )
    for path in dec.get("unread_files", []):
        out.append(
            finding(
                "unread_file",
                f"{path} is in the hour's dump folder but is not named "
                "<topic>+<partition>+<startOffset>.<avro|bin|json>[.gz]: nothing read it; rename "
                "it if it holds records, move it away if not, and decode the hour again",
            )
        )
    if tot.get(Stat.SEGMENTS_ORPHANED):
        out.append(
            finding(
                "orphan_segment",
                f"{tot[Stat.SEGMENTS_ORPHANED]} segments of envelopes that never completed",
            )
        )
    if tot.get(Stat.SEQ_GAPS):
        out.append(
            finding(
                "seq_gap",
                f"{tot[Stat.SEQ_GAPS]} jumps in the producer's sequence numbers, "
                f"{tot.get(Stat.SEQ_MISSING, 0)} entries missing",
            )
        )
    if tot.get(Stat.DDL_UNREADABLE):
        out.append(
            finding(
                "unreadable_ddl",
                f"{tot[Stat.DDL_UNREADABLE]} DDL statement(s) could not be read (quarantined with "
                "their text): their tables' later rows are quarantined until the table is defined "
                "again; give its `ddl:` in the pipeline config and re-run the hours",
            )
        )
    if open_age_hours is not None and open_age_hours > open_limit_hours:
        out.append(
            finding(
                "open_transaction",
                f"a record has been carried for {open_age_hours:.1f} h (over "
                f"{open_limit_hours} h): an open transaction, an unfinished envelope or an "
                "UPDATE_BEFOR still waiting for its partner; it is carried from hour to hour and "
                "not applied",
            )
        )
    return out


class GtidSpan(TypedDict):
    first: int
    last: int
    distinct: int


def gtid_report(
    spans: dict[str, GtidSpan], previous: dict[str, dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], list[Finding]]:
    """GTID continuity per source (server UUID / MariaDB domain): inside the hour, and since
    the previous hour's last GTID."""
    gtid: dict[str, dict[str, Any]] = {}
    out = []
    for src, g in sorted(spans.items()):
        span = g["last"] - g["first"] + 1
        gtid[src] = dict(g, missing_inside=span - g["distinct"])
        before = previous.get(src, {}).get("last")
        if before is not None and g["first"] > before + 1:
            gtid[src]["missing_since_previous_hour"] = g["first"] - before - 1
            out.append(
                finding(
                    "gtid_gap",
                    f"GTIDs {before + 1}..{g['first'] - 1} of {src} are in neither this hour "
                    "nor the previous one",
                )
            )
        if span > g["distinct"]:
            out.append(
                finding(
                    "gtid_gap",
                    f"{span - g['distinct']} GTIDs of {src} between {g['first']} and "
                    f"{g['last']} have no change in this stream (filtered upstream, or lost)",
                )
            )
    return gtid, out


# -- tables ----------------------------------------------------------------------------------
def iso_ms(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def table_report(
    name: str, t: TableMerge, newest_ms: int | None, hour_end: datetime
) -> tuple[dict[str, Any], list[Finding]]:
    """One table's row of the report (with its own balance), and its findings."""
    skipped: dict[str, int] = dict(t.get("skipped", {}))  # type: ignore[arg-type]
    changes = sum(t.get("changes_by_op", {}).values())
    applied = int(t.get("applied", 0))
    pub = t.get("published", {})
    row = {
        "rows_before": t.get("rows_before"),
        "rows_after": t.get("rows_after"),
        "changes_by_op": t.get("changes_by_op", {}),
        "applied": applied,
        "skipped": skipped,
        "pk_changes": t.get("pk_changes", 0),
        "snapshot_rows_loaded": t.get("snapshot_rows_loaded", 0),
        "repaired": t.get("repaired", 0),
        "duplicate_keys": pub.get("duplicate_keys", 0),
        "uncastable_values": pub.get("uncastable", {}),
        "checksum": t.get("checksum"),
        "schema_version": t.get("schema_version"),
        "schema_changed": t.get("schema_changed", False),
        "schema_changes": t.get("schema_changes", []),
        "ddl_seen": t.get("ddl_seen", 0),
        "newest_source_time": iso_ms(newest_ms),
        "freshness_seconds": None
        if newest_ms is None
        else round(hour_end.timestamp() - newest_ms / 1000, 3),
        "published_snapshot_id": pub.get("snapshot_id"),
        "balanced": changes == applied + sum(skipped.values()),
    }
    return row, _table_findings(name, t, skipped, pub)


def _table_findings(name: str, t: TableMerge, skipped: dict[str, int], pub: Any) -> list[Finding]:
    out = []
    if t.get("repaired"):
        out.append(
            finding(
                "repaired",
                f"{t['repaired']} keys corrected from the live source (`recon reconcile "
                "--repair`): the stream did not bring the table to the source's rows; each "
                "key's row before and after is in the report's repairs",
                table=name,
            )
        )
    if pub.get("duplicate_keys"):
        out.append(
            finding(
                "balance", f"{pub['duplicate_keys']} duplicate primary keys published", table=name
            )
        )
    if t.get("uncastable_columns"):
        out.append(
            finding(
                "quarantined",
                f"{skipped.get('uncastable', 0)} changes set aside, their values do not fit the "
                f"column (the keys keep their previous version; bytes in the quarantine): "
                f"{t['uncastable_columns']}; declare the column's type with `ddl:` or fix the "
                "producer, then run the hour again",
                table=name,
            )
        )
    conflicts = [c for c in t.get("schema_changes", []) if "type conflict" in c]
    if conflicts:
        out.append(
            finding(
                "type_change",
                f"the source changed a column's type in a way Iceberg cannot promote "
                f"({'; '.join(conflicts)}): the published column keeps its type and values "
                "that do not fit it are set aside; to take the new type, declare it with "
                "`ddl:` and run `recon rebuild`",
                table=name,
            )
        )
    if pub.get("uncastable"):
        out.append(
            finding(
                "quarantined",
                f"values that do not fit their column type were published as NULL: "
                f"{pub['uncastable']}; declare the table's `ddl:`",
                table=name,
            )
        )
    return out


def order_findings(dec: DecodeCounters, mer: MergeResult, first_hour: bool) -> list[Finding]:
    """Hours run out of order: decoded without the hour before (its carry missing or lost), or
    merged while earlier hours of the pipeline were not."""
    out = []
    if not first_hour and not dec.get("previous_hour_decoded", True):
        out.append(
            finding(
                "hour_order",
                "the hour before was not decoded first: what it carries over (open transactions, "
                "segments, update pairs) is missing here; decode it, then run this hour again",
            )
        )
    expected = dec.get("previous_carried_out")
    got = int(dec["totals"].get(Stat.RECORDS_CARRIED_IN, 0))
    if expected is not None and got < expected:
        out.append(
            finding(
                "hour_order",
                f"the hour before carried out {expected} records but {got} came in (its carry "
                "folder is lost or was rewritten): run the hour before again, then this one",
            )
        )
    missing = mer.get("hours_missing_before") or []
    if missing:
        n = int(mer.get("hours_missing_count", len(missing)))
        more = f" and {n - len(missing)} more" if n > len(missing) else ""
        out.append(
            finding(
                "hour_order",
                f"{n} earlier hours were not merged when this one was ({', '.join(missing)}{more}):"
                " this hour's published version misses their changes; run them, then this hour "
                "again",
            )
        )
    return out


def not_merged_findings(mer: MergeResult) -> list[Finding]:
    return [
        finding(
            "not_merged",
            f"{n} changes of this hour were not merged: the run was limited to "
            f"{', '.join(mer.get('merged_tables', []))}; run the hour again for this table",
            table=name,
        )
        for name, n in sorted(mer.get("not_merged", {}).items())
    ]


# -- the identity ----------------------------------------------------------------------------
def events_merged(mer: MergeResult) -> int:
    """Every event the merge accounted for: configured tables (changes + DDL), tables not
    configured, and tables a limited run left out."""
    return (
        sum(
            sum(t.get("changes_by_op", {}).values()) + t.get("ddl_seen", 0)
            for t in mer["tables"].values()
        )
        + sum(mer.get("not_configured", {}).values())
        + int(mer.get("ddl_not_configured", 0))
        + sum(mer.get("not_merged", {}).values())
        + int(mer.get("ddl_not_merged", 0))
    )


_CONTROL = (Stat.HEARTBEATS, Stat.CHECKPOINTS, Stat.TOMBSTONES, Stat.TRANSACTION_MARKERS)


def dispositions(tot: dict[str, int], distinct: int) -> dict[str, Any]:
    """Link 2: what became of every record the decoders were fed (module docstring)."""
    carried_in = int(tot.get(Stat.RECORDS_CARRIED_IN, 0))
    carried_out = int(tot.get(Stat.RECORDS_CARRIED_OUT, 0))
    quarantined = int(tot.get(Stat.RECORDS_QUARANTINED, 0))
    lost = int(tot.get(Stat.RECORDS_LOST, 0))
    counted = Stat.RECORDS_CONSUMED in tot
    if counted:
        consumed = int(tot[Stat.RECORDS_CONSUMED])
        balanced = distinct + carried_in == consumed + carried_out + quarantined
    else:  # decoded by a version that did not count consumption: the remainder
        consumed = distinct + carried_in - carried_out - quarantined
        balanced = consumed >= 0
    return {
        "distinct": distinct,
        "carried_in": carried_in,
        "consumed": consumed,
        "carried_out": carried_out,
        "quarantined": quarantined,
        "lost": lost,
        "consumed_counted": counted,
        "control": {str(k): int(tot.get(k, 0)) for k in _CONTROL if tot.get(k)},
        "balanced": balanced and not lost,
    }


def identity(
    dec: DecodeCounters, mer: MergeResult, tables: dict[str, dict[str, Any]]
) -> tuple[dict[str, Any], list[Finding]]:
    """The conservation identity, link by link (module docstring), and a `balance` finding
    naming the links that do not hold."""
    tot = dec["totals"]
    read = int(tot.get(Stat.RECORDS, 0))
    distinct = int(tot.get(Stat.RECORDS_IN, 0))
    dup_in = int(tot.get(Stat.DUPLICATES_IN_HOUR, 0))
    dup_x = int(tot.get(Stat.DUPLICATES_CROSS_HOUR, 0))
    decoded = sum(dec.get("events_by_op", {}).values())
    merged = events_merged(mer)
    links: dict[str, Any] = {
        "records": {
            "read": read,
            "distinct": distinct,
            "duplicates_in_hour": dup_in,
            "duplicates_of_earlier_hours": dup_x,
            "balanced": read == distinct + dup_in + dup_x,
        },
        "dispositions": dispositions(tot, distinct),
        "events": {
            "decoded": decoded,
            "merged": merged,
            "not_configured": mer.get("not_configured", {}),
            "not_merged": mer.get("not_merged", {}),
            "balanced": decoded == merged,
        },
        "tables": {n: t["balanced"] for n, t in tables.items()},
    }
    bad = [k for k in ("records", "dispositions", "events") if not links[k]["balanced"]]
    if links["dispositions"]["lost"]:
        bad[bad.index("dispositions")] = (
            f"dispositions ({links['dispositions']['lost']} records lost by a decoder, "
            "kept in quarantine)"
        )
    bad += [f"table {n}" for n, ok in links["tables"].items() if not ok]
    links["balanced"] = not bad
    if bad:
        return links, [
            finding("balance", "the conservation identity does not balance: " + ", ".join(bad))
        ]
    return links, []


# -- freshness and the verdict ---------------------------------------------------------------
def staleness(dec: DecodeCounters, newest_ms: int | None, hour_end: datetime) -> list[Finding]:
    """Nothing shows the source is alive: no records at all, or only old changes (heartbeats
    and checkpoints count as signs of life)."""
    tot = dec["totals"]
    alive = tot.get(Stat.HEARTBEATS) or tot.get(Stat.CHECKPOINTS)
    if newest_ms is None and not alive and int(tot.get(Stat.RECORDS, 0)) == 0:
        return [finding("stale", "no records at all this hour: nothing shows the source is alive")]
    if newest_ms is not None and not alive:
        if hour_end.timestamp() - newest_ms / 1000 > STALE_AFTER_SECONDS:
            return [
                finding("stale", "the newest source change is over 2 h older than the hour's end")
            ]
    return []


def judge(findings: list[Finding], fail_on: Iterable[str]) -> tuple[Verdict, list[str]]:
    """Set each finding's severity; the hour's verdict and the kinds that fail it."""
    failing = set(fail_on) | ALWAYS_FAILS
    for f in findings:  # an acknowledged finding has been judged by a person: it warns
        f["severity"] = "fail" if f["kind"] in failing and not f.get("acknowledged") else "warn"
    if any(f["severity"] == "fail" for f in findings):
        return "fail", sorted(failing)
    return ("warn" if findings else "pass"), sorted(failing)


def where(f: Finding) -> str:
    """`table=... topic=... partition=...` of a finding, for one-line output."""
    return " ".join(f"{k}={f[k]}" for k in ("table", "topic", "partition") if f.get(k) is not None)
