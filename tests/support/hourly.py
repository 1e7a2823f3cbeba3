"""A pure-Python mirror of the decode stage's hour loop (dedupe, carry), for property tests."""

from __future__ import annotations

from recon.core.model import RawRecord
from recon.decode.base import DecodeContext
from recon.decode.stream import decode_records


def decode_by_hours(
    hours: list[list[RawRecord]], fmt: str, ctx: DecodeContext
) -> tuple[list[dict], list[dict], dict]:
    """Decode hour after hour: drop records seen in the same or an earlier hour, feed the
    previous hour's carried records first. Returns (events, quarantine rows, summed stats)."""
    seen: set[tuple[str, int, int]] = set()
    carry: list[RawRecord] = []
    events: list[dict] = []
    quarantine: list[dict] = []
    stats: dict[str, int] = {}
    for recs in hours:
        fresh = []
        for r in recs:
            k = (r.topic, r.partition, r.offset)
            if k in seen:
                stats["duplicates"] = stats.get("duplicates", 0) + 1
                continue
            seen.add(k)
            fresh.append(RawRecord(r.topic, r.partition, r.offset, r.key, r.value, r.ts_ms))
        out = decode_records(fresh + carry, fmt, ctx).to_pylist()
        carry = carried_records(out)
        events += [r for r in out if r["kind"] == "event"]
        quarantine += [r for r in out if r["kind"] == "quarantine"]
        for r in out:
            if r["kind"] == "stat":
                stats[r["stat"]] = stats.get(r["stat"], 0) + r["n"]
    stats["left_carried"] = len(carry)
    return events, quarantine, stats


def carried_records(out: list[dict]) -> list[RawRecord]:
    """The carry rows of a decode output, as the records the next hour is fed first."""
    return [
        RawRecord(
            r["topic"],
            r["partition"],
            r["offset"],
            r["raw_key"],
            r["raw_value"],
            r["raw_ts_ms"],
            r["raw_headers"],
            carried=True,
            skip=r["skip"] or 0,
        )
        for r in out
        if r["kind"] == "carry"
    ]


def event_key(e: dict) -> tuple:
    return tuple((k, repr(v)) for k, v in sorted(e.items()) if k != "kind")
