"""Decode a sorted stream of raw records: the body of the `mapInArrow` decode step.

Input batches hold raw records (schema `model.RAW_SCHEMA`) sorted by (topic, partition, offset);
one decoder instance runs per (topic, partition), so segments, transactions and update pairs are
reassembled in offset order. Output batches use `model.OUTPUT_SCHEMA`, one row kind per output:
events, quarantined records (with their bytes and reason), records carried to the next hour, and
counters. No record is dropped without a counter or a quarantine row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from recon.core.model import OUTPUT_SCHEMA, RawRecord
from recon.decode.base import DecodeContext, Sink, StreamDecoder
from recon.decode.stats import Stat, finish_error
from recon.formats import FORMAT_SPECS, load_object

_RAW_NAMES = ("topic", "partition", "offset", "key", "value", "ts_ms", "headers", "carried", "skip")
_FLUSH_ROWS = 20_000


def _raw_row(kind: str, rec: RawRecord, **extra: object) -> dict[str, object]:
    row: dict[str, object] = {
        "kind": kind,
        "topic": rec.topic,
        "partition": rec.partition,
        "offset": rec.offset,
        "raw_key": rec.key,
        "raw_value": rec.value,
        "raw_ts_ms": rec.ts_ms,
        "raw_headers": rec.headers,
    }
    row.update(extra)
    return row


def _drain(sink: Sink, carry: list[RawRecord]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for ev in sink.events:
        r = ev.as_row()
        r["kind"] = "event"
        rows.append(r)
    for rec, reason in sink.quarantine:
        rows.append(_raw_row("quarantine", rec, reason=reason))
    for rec in carry:
        rows.append(_raw_row("carry", rec, skip=rec.skip))
    sink.events.clear()
    sink.quarantine.clear()
    carry.clear()
    return rows


def decode_stream(
    batches: Iterable[pa.RecordBatch], fmt: str, ctx: DecodeContext
) -> Iterator[pa.RecordBatch]:
    sink = Sink()
    cls: type[StreamDecoder] = load_object(FORMAT_SPECS[fmt].decoder)
    current: tuple[str, int] | None = None
    dec: StreamDecoder | None = None
    carry: list[RawRecord] = []

    def finish(d: StreamDecoder) -> None:
        try:
            out = d.finish()
        except Exception as err:  # a decoder bug must not lose records: quarantine them
            out = []
            sink.stats[(current[0], current[1], Stat.DECODER_FINISH_ERRORS)] += 1  # type: ignore[index]
            sink.stats[(current[0], current[1], finish_error(err))] += 1  # type: ignore[index]
        # a record quarantined this hour is accounted for: carrying it too would decode it
        # (and quarantine it) again next hour, counting it twice
        kept = []
        for r in out:
            if (r.topic, r.partition, r.offset) in sink.quarantined:
                sink.count(r, Stat.CARRY_SKIPPED_QUARANTINED)
                continue
            sink.count(r, Stat.RECORDS_CARRIED_OUT)
            kept.append(r)
        out = kept
        sink.quarantined.clear()
        carry.extend(out)

    for batch in batches:
        cols = {n: batch.column(n).to_pylist() for n in _RAW_NAMES}
        for i in range(batch.num_rows):
            key = (cols["topic"][i], cols["partition"][i])
            if key != current:
                if dec is not None:
                    finish(dec)
                current = key
                dec = cls(ctx, sink)
            rec = RawRecord(
                topic=key[0],
                partition=key[1],
                offset=cols["offset"][i],
                key=cols["key"][i],
                value=cols["value"][i],
                ts_ms=cols["ts_ms"][i],
                headers=cols["headers"][i],
                carried=bool(cols["carried"][i]),
                skip=cols["skip"][i] or 0,
            )
            sink.count(rec, Stat.RECORDS_CARRIED_IN if rec.carried else Stat.RECORDS_IN)
            try:
                dec.feed(rec)  # type: ignore[union-attr]
            except Exception as err:  # noqa: BLE001 - a decoder bug quarantines, never crashes
                sink.bad(rec, f"decoder error: {type(err).__name__}: {err}")
        if len(sink.events) + len(sink.quarantine) >= _FLUSH_ROWS:
            yield pa.RecordBatch.from_pylist(_drain(sink, carry), schema=OUTPUT_SCHEMA)
    if dec is not None:
        finish(dec)
    rows = _drain(sink, carry)
    for (topic, partition, stat), n in sorted(sink.stats.items()):
        rows.append({"kind": "stat", "topic": topic, "partition": partition, "stat": stat, "n": n})
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=OUTPUT_SCHEMA)


def decode_records(
    records: list[RawRecord], fmt: str, ctx: DecodeContext | None = None
) -> pa.Table:
    """Decode an in-memory list of records (sorted here), for tests and small tools."""
    from recon.core.model import RAW_SCHEMA

    recs = sorted(records, key=lambda r: (r.topic, r.partition, r.offset))
    batch = pa.RecordBatch.from_pylist(
        [{n: getattr(r, n) for n in _RAW_NAMES} for r in recs], schema=RAW_SCHEMA
    )
    out = list(decode_stream([batch], fmt, ctx or DecodeContext()))
    return pa.Table.from_batches(out, schema=OUTPUT_SCHEMA)
