"""Decode a sorted stream of raw records: the body of the `mapInArrow` decode step.

Input batches hold raw records (schema `model.RAW_SCHEMA`) sorted by (topic, partition, offset);
one decoder instance runs per (topic, partition), so segments, transactions and update pairs are
reassembled in offset order. Output batches use `model.OUTPUT_SCHEMA`, one row kind per output:
events, quarantined records (with their bytes and reason), records carried to the next hour, and
counters. No record is dropped without a counter or a quarantine row.
"""

from __future__ import annotations

import gc
import operator
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain, repeat
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from recon.core.model import EVENT_FIELDS, OUTPUT_SCHEMA, RAW_SCHEMA, Event, RawRecord
from recon.decode.base import DecodeContext, Sink, StreamDecoder, value_bytes
from recon.decode.lane import Lane, LaneImage, LaneRows
from recon.decode.stats import Stat, finish_error
from recon.formats import FORMAT_SPECS, load_object

_RAW_NAMES = ("topic", "partition", "offset", "key", "value", "ts_ms", "headers", "carried", "skip")
_FLUSH_ROWS = 20_000
_FLUSH_BYTES = 256 << 20
"""Record value bytes fed between two drains at most (an Arrow string or binary column holds
2 GiB: rows of big values drain before they fill it), unless one record alone is larger."""
_DDL_FIELDS = ("db", "tbl", "op", "ddl", "order_key", "gtid")


def _raw_row(kind: str, rec: RawRecord, **extra: object) -> dict[str, object]:
    row: dict[str, object] = {
        "kind": kind,
        "topic": rec.topic,
        "partition": rec.partition,
        "offset": rec.offset,
        "raw_key": rec.key,
        "raw_value": value_bytes(rec.value),
        "raw_ts_ms": rec.ts_ms,
        "raw_headers": rec.headers,
    }
    row.update(extra)
    return row


_EVENT_NAMES = tuple(f.name for f in EVENT_FIELDS)
_IMAGES = frozenset(("before", "after"))
"""The map columns whose objects are an event's own (its images): built flat, without looking
for objects that events share (`_nested_array`: a dict of every row's object, for nothing)."""
_VALUES = operator.methodcaller("values")
_EVENT_GETTERS = tuple((n, operator.attrgetter(n)) for n in _EVENT_NAMES)


def _event_batch(events: list[Event], kind: str) -> pa.RecordBatch:
    """Events as an Arrow batch of the output schema, built column by column (a dict per row
    and `from_pylist` cost a third of the decode's time)."""
    n = len(events)
    # a column per field, each read by a C-level map over the events (2.7x faster than one
    # getter of every field per event transposed by `zip(*rows)`)
    columns = {name: list(map(get, events)) for name, get in _EVENT_GETTERS}
    arrays = []
    for f in OUTPUT_SCHEMA:
        if f.name == "kind":
            arrays.append(pa.array([kind] * n, f.type))
        elif f.name in columns:
            values = columns[f.name]
            if f.name in _IMAGES:
                arrays.append(_flat_nested_array(values, f.type))
            elif pa.types.is_map(f.type) or pa.types.is_list(f.type):
                arrays.append(_nested_array(values, f.type))
            else:
                arrays.append(pa.array(values, f.type))
        else:
            arrays.append(pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=OUTPUT_SCHEMA)


def _lane_batch(rows: LaneRows) -> pa.RecordBatch:
    """The lanes' rows as an Arrow batch of kind `event` (`_event_batch` of the same events)."""
    n = len(rows)
    columns = rows.columns()
    arrays = []
    for f in OUTPUT_SCHEMA:
        if f.name == "kind":
            arrays.append(pa.repeat(pa.scalar("event", f.type), n))
        elif f.name in _IMAGES:
            arrays.append(_image_array(getattr(rows, f.name), f.type, rows.repeated, f.name))
        elif f.name in columns:
            values = columns[f.name]
            if pa.types.is_map(f.type) or pa.types.is_list(f.type):
                arrays.append(_nested_array(values, f.type, rows.repeated, f.name))
            else:
                arrays.append(_scalar_array(values, f.type))
        else:
            arrays.append(pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=OUTPUT_SCHEMA)


def _scalar_array(values: Sequence[Any], typ: pa.DataType) -> pa.Array:
    """A column of plain values; one value repeated (a one-table stream's database, table,
    topic, binlog file, a NULL GTID) is converted once (each row's took ~20-30 ns)."""
    n = len(values)
    if n > 1 and values[0] == values[-1] and values.count(values[0]) == n:
        return pa.repeat(pa.scalar(values[0], typ), n)
    return pa.array(values, typ)


def _image_array(
    image: LaneImage, typ: pa.MapType, repeated: dict[str, Any] | None = None, name: str = ""
) -> pa.Array:
    off, mask = _offsets(image.lengths)
    names = _names_array(image.names, typ.key_type, repeated, name)
    values = _values_array(image.data, image.sizes, typ.item_type)
    return pa.MapArray.from_arrays(off, names, values, type=typ, mask=mask)


def _values_array(data: bytearray, sizes: bytearray, typ: pa.DataType) -> pa.Array:
    """An image column's values from their UTF-8 (`data`) and sizes (`sizes`: native int32s,
    -1 a NULL), as `LaneImage` keeps them: the offsets summed by numpy, the bytes copied once."""
    n = np.frombuffer(bytes(sizes), np.int32)  # a copy: no view keeps the bytearray from clearing
    nulls = n < 0
    off = np.zeros(len(n) + 1, np.int64)
    np.cumsum(np.maximum(n, 0), out=off[1:])
    if off[-1] > np.iinfo(np.int32).max:  # too big for a string column: as Arrow would say
        raise pa.ArrowCapacityError(f"image values of {off[-1]} bytes in one batch")
    bitmap = None
    if nulls.any():
        bitmap = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
    buffers = [bitmap, pa.py_buffer(off.astype(np.int32)), pa.py_buffer(bytes(data))]
    return pa.Array.from_buffers(typ, len(n), buffers, null_count=int(nulls.sum()))


def _names_array(
    rows: list[tuple[str, ...]], typ: pa.DataType, repeated: dict[str, Any] | None = None,
    name: str = "",
) -> pa.Array:  # fmt: skip
    """The names of rows' images, flat (each row's tuple in turn): `_nested_array` of the
    tuples, whose rows sharing one tuple (their schema's: what the C reads give an image of
    every column in its order) have its names built once, where building every row's names
    took ~0.35 us a row of six columns."""
    return _nested_array(rows, pa.list_(typ), repeated, name).flatten()


def _offsets(lengths: list[int]) -> tuple[pa.Array, pa.Array | None]:
    """A nested column's offsets from its rows' lengths (-1: a NULL row), and its NULL mask
    (None: no NULL row); summed by numpy (a Python `accumulate` with a `max` per row took
    ~0.2 us a row)."""
    n = np.fromiter(lengths, np.int32, len(lengths))
    off = np.zeros(len(lengths) + 1, np.int32)
    mask = n < 0
    if not mask.any():
        np.cumsum(n, out=off[1:])
        return pa.array(off), None
    np.cumsum(np.maximum(n, 0), out=off[1:])
    return pa.array(off), pa.array(mask)


def _nested_array(
    values: list[Any], typ: pa.DataType, repeated: dict[str, Any] | None = None, name: str = ""
) -> pa.Array:
    """A map<string,string> (dicts) or list<string> column. Rows that hold one shared object
    (a table's column types, an event's key columns shared by its rows) are built once each
    and repeated by index: most rows of a batch do.

    `repeated` (a decode task's, `LaneRows.repeated`): where every row holds the same value,
    the column `name` of an earlier batch whose rows all held it too, sliced (the column built
    and repeated again cost ~80-230 ns a row: a one-table stream's key, types and image names
    are the same batch after batch). The value it was built of is kept as a copy and compared
    with this batch's, so a value changed in place since is built again."""
    n = len(values)
    if n and _one_value(values):
        # every row holds one value (a one-table batch's key and types, no defaults)
        first = values[0]
        held = repeated.get(name) if repeated is not None else None
        if held is not None and len(held[1]) >= n and _same_value(held[0], first):
            return held[1].slice(0, n)
        out = _flat_nested_array([first], typ).take(np.zeros(n, np.int32))
        if repeated is not None:
            repeated[name] = (_copy_of(first), out)
        return out
    ids = list(map(id, values))
    distinct = dict(zip(ids, values, strict=True))
    if len(distinct) * 4 > len(values):
        return _flat_nested_array(values, typ)
    at = {i: n for n, i in enumerate(distinct)}
    rows = pa.array(list(map(at.__getitem__, ids)), pa.int32())
    return _flat_nested_array(list(distinct.values()), typ).take(rows)


def _one_value(values: list[Any]) -> bool:
    """Whether every row holds the first row's value: the same dict object (two equal dicts
    may hold their names in other orders, which a map keeps), else the same tuple or list by
    `==`; each checked in C (at once where the rows hold one object, ~5x less than a dict of
    the rows' objects)."""
    first = values[0]
    if isinstance(first, dict):
        return all(map(operator.is_, values, repeat(first)))
    return values.count(first) == len(values)


def _same_value(held: Any, value: Any) -> bool:
    """Whether a copy (`_copy_of`) holds what `value` holds, in the same order."""
    if type(held) is not type(value) or held != value:
        return False
    return not isinstance(value, dict) or list(held) == list(value)


def _copy_of(value: Any) -> Any:
    """A copy of a row's map or list value (a dict, list or tuple; None)."""
    if isinstance(value, dict):
        return dict(value)
    return list(value) if isinstance(value, list) else value


def _flat_nested_array(values: list[Any], typ: pa.DataType) -> pa.Array:
    """A map<string,string> (dicts) or list<string> column from flat keys/items and offsets,
    each gathered by a C-level iteration (~8x faster than pa.array over a list of (key, value)
    pairs per row, and 2.3x faster than a Python loop extending the lists row by row)."""
    present = [v for v in values if v is not None]
    if len(present) == len(values):  # no NULL row (most columns of most batches)
        off, mask = _offsets(list(map(len, values)))
    else:
        off, mask = _offsets([-1 if v is None else len(v) for v in values])
    keys = list(chain.from_iterable(present))
    if pa.types.is_map(typ):
        items = list(chain.from_iterable(map(_VALUES, present)))
        k, i = pa.array(keys, typ.key_type), pa.array(items, typ.item_type)
        return pa.MapArray.from_arrays(off, k, i, type=typ, mask=mask)
    return pa.ListArray.from_arrays(off, pa.array(keys, typ.value_type), type=typ, mask=mask)


def _frozen(value: Any, memo: dict[int, Any]) -> Any:
    """A map's items or a list's values as a tuple, once per object (`memo`, by `id`: most
    events share their table's column types and key)."""
    if value is None:
        return None
    got = memo.get(id(value))
    if got is None:
        got = memo[id(value)] = tuple(value.items() if isinstance(value, dict) else value)
    return got


def _shape_batch(events: list[Event], lanes: dict[tuple[Any, ...], list[Any]]) -> pa.RecordBatch:
    """One event of each distinct shape among `events` (`recon.decode.summary`), of kind
    `shape` with how many in `n`. Counted here, where the events are objects: Spark's aggregate
    over the written events rebuilt every event's parts as arrays to group them (~1 s of a
    500k-event hour, on 2 cores). Grouped first by the column types', key's and defaults'
    objects (most events share their table's; the events are alive, so their `id`s are
    theirs), then those groups by what the objects hold. `lanes`: the lanes' rows' shapes,
    counted by the same first keys (`LaneRows.shapes`)."""
    by_object: dict[tuple[Any, ...], list[Any]] = {k: list(v) for k, v in lanes.items()}
    for ev in events:
        img = ev.after if ev.after is not None else ev.before
        key = (
            ev.db, ev.tbl, ev.op, ev.ddl, ev.order_key if ev.op == "ddl" else None,
            None if img is None else tuple(img), id(ev.types), id(ev.pk), id(ev.defaults),
        )  # fmt: skip
        group = by_object.get(key)
        if group is None:
            by_object[key] = [ev, 1]
        else:
            group[1] += 1
    memo: dict[int, Any] = {}
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for key, (ev, n) in by_object.items():
        held = (_frozen(ev.types, memo), _frozen(ev.pk, memo), _frozen(ev.defaults, memo))
        group = groups.setdefault((*key[:6], *held), [ev, 0])
        group[1] += n
    batch = _event_batch([g[0] for g in groups.values()], "shape")
    n = pa.array([g[1] for g in groups.values()], pa.int64())
    return batch.set_column(OUTPUT_SCHEMA.get_field_index("n"), OUTPUT_SCHEMA.field("n"), n)


def _drain(
    sink: Sink, carry: list[RawRecord], lanes: LaneRows, shapes: bool = False
) -> list[pa.RecordBatch]:
    batches = []
    if sink.events:
        batches.append(_event_batch(sink.events, "event"))
    if len(lanes):
        batches.append(_lane_batch(lanes))
    if shapes and (sink.events or len(lanes)):
        batches.append(_shape_batch(sink.events, lanes.shapes))
    lanes.clear()
    if sink.shadows:
        batches.append(_event_batch(sink.shadows, "pairable"))
    rows: list[dict[str, object]] = []
    for rec, reason, ddl in sink.quarantine:
        extra = {} if ddl is None else {k: ddl.as_row()[k] for k in _DDL_FIELDS}
        rows.append(_raw_row("quarantine", rec, reason=reason, **extra))
    for rec in carry:
        rows.append(_raw_row("carry", rec, skip=rec.skip))
    if rows:
        batches.append(pa.RecordBatch.from_pylist(rows, schema=OUTPUT_SCHEMA))
    sink.shadows.clear()
    sink.events.clear()
    sink.quarantine.clear()
    carry.clear()
    return batches


class _StreamDriver:
    """Feeds each (topic, partition) stream, in offset order, to a decoder of its own."""

    def __init__(
        self, fmt: str, ctx: DecodeContext, shapes: bool = False, lanes: bool = True
    ) -> None:
        self.fmt = fmt
        self.shapes = shapes
        self.cls: type[StreamDecoder] = load_object(FORMAT_SPECS[fmt].decoder)
        self.lane_class = self.cls.lane if lanes else None
        self.ctx = ctx
        self.sink = Sink()
        self.lane_rows = LaneRows()
        self.current: tuple[str, int] | None = None
        self.dec: StreamDecoder | None = None
        self.lane: Lane | None = None
        self.carry: list[RawRecord] = []
        # the current stream's per-record counters, added to the sink's when it ends (a
        # counter update per record and per counter cost ~5% of a JSON decode)
        self.n_in = self.n_carried_in = self.n_consumed = 0
        self.ended: set[tuple[str, int]] = set()
        self.pending_bytes = 0
        """Record value bytes fed since the last drain."""

    def _enter(self, key: tuple[str, int]) -> None:
        """The stream of `key` goes on, or begins: the decoder (and lane) of its own."""
        if key != self.current or self.dec is None:
            self.finish()
            if key in self.ended:  # two decoders for one partition would pair and count wrong
                raise RuntimeError(
                    f"records of {key[0]}[{key[1]}] came after another partition's: the decode "
                    "input is not grouped by partition (a bug)"
                )
            self.current = key
            self.dec = self.cls(self.ctx, self.sink)
            if self.lane_class is not None:
                self.lane = self.lane_class(self.dec, self.lane_rows)

    def pending(self) -> int:
        """The rows waiting for the next `drain`."""
        return len(self.sink.events) + len(self.sink.quarantine) + len(self.lane_rows)

    def full(self) -> bool:
        """Time to drain: a batch's rows, or its bytes."""
        return (
            self.pending() >= _FLUSH_ROWS
            or self.pending_bytes >= _FLUSH_BYTES
            or bool(self.sink.spilled)
        )

    def _loop_end(self, sizes: np.ndarray, run_start: int, i: int, end: int) -> int:
        """Where the lane's record loop may read to from `i`: before the next record too large
        to decode (`feed` quarantines it), and within the bytes a batch holds (one record at
        least)."""
        rel = sizes[i - run_start : end - run_start]
        big = np.flatnonzero(rel > self.ctx.max_record_bytes)
        upto = end if not len(big) else i + int(big[0])
        room = _FLUSH_BYTES - self.pending_bytes
        fit = int(np.searchsorted(np.cumsum(rel[: upto - i]), room, side="right"))
        return i + fit if fit else min(upto, i + 1)

    def feed_run(self, run: RawRun) -> Iterator[pa.RecordBatch]:
        """Feed a run of one partition's records (`RawRun`): what the lane's record loop
        (`Lane.run`) takes in one call, the rest one by one (`feed`); drained batches yielded
        as `decode_raw` drains them, at `_FLUSH_ROWS` rows."""
        cols, i, end = run.cols, run.start, run.end
        if i >= end:
            return
        key = (cols[0][i], cols[1][i])
        sizes = value_sizes(cols[4], i, end) if self.lane_class is not None else None
        while i < end:
            self._enter(key)
            lane = self.lane
            if lane is not None and sizes is not None:
                upto = self._loop_end(sizes, run.start, i, end)
                stop, consumed = lane.run(cols, i, upto, _FLUSH_ROWS - self.pending())
                # drained where `decode_raw` drains records fed one by one: after the one that
                # fills the batch (a stream's end, in `_enter`, only adds to it)
                if stop > i:
                    self.n_in += stop - i
                    self.n_consumed += consumed
                    self.pending_bytes += int(sizes[i - run.start : stop - run.start].sum())
                    i = stop
                    if self.full():
                        yield from self.drain()
            if i < end:  # the record the loop left (a lane without one: every record)
                self.feed(run.record(i))
                i += 1
                if self.full():
                    yield from self.drain()

    def feed(self, rec: RawRecord) -> None:
        self._enter((rec.topic, rec.partition))
        if rec.carried:
            self.n_carried_in += 1
        else:
            self.n_in += 1
        size = len(rec.value) if rec.value is not None else 0
        self.pending_bytes += size
        if size > self.ctx.max_record_bytes:
            self._too_large(rec, size)
            return
        lane = self.lane
        if lane is not None:
            used = lane.take(rec)
            if used is not None:
                self.n_consumed += used
                return
            held = lane.release()  # the decoder takes over from the record the lane held
            if held is not None:
                self._decode(held)
        self._decode(rec)

    def _too_large(self, rec: RawRecord, size: int) -> None:
        """A record too large to decode: quarantined unread, with its bytes (what the lane
        held before it goes to the decoder first, as for any record the lane does not take)."""
        held = self.lane.release() if self.lane is not None else None
        if held is not None:
            self._decode(held)
        self.sink.bad(
            rec,
            f"record too large: {size} bytes, over max_record_bytes "
            f"({self.ctx.max_record_bytes}); raise it in the pipeline config to decode it",
        )
        self._count_consumed(rec)

    def _decode(self, rec: RawRecord) -> None:
        assert self.dec is not None
        try:
            self.dec.feed(rec)
        except Exception as err:  # noqa: BLE001 - a decoder bug quarantines, never crashes
            self.sink.bad(rec, f"decoder error: {type(err).__name__}: {err}")
        self._count_consumed(rec)

    def _count_consumed(self, fed: RawRecord | None) -> None:
        """Count the records this feed used up: the one fed unless the decoder held or
        quarantined it, and those held before that the decoder released (counted once each,
        independently of the other dispositions: the audit's identity compares them)."""
        sink = self.sink
        released = sink.released
        if fed is not None:
            k = (fed.topic, fed.partition, fed.offset)
            if k not in sink.held and k not in sink.quarantined:
                if not released:  # the common case: the record fed, alone
                    self.n_consumed += 1
                    return
                released[k] = fed
        for k, r in released.items():
            if k not in sink.quarantined:
                sink.count(r, Stat.RECORDS_CONSUMED)
        released.clear()

    def _add_stream_counts(self) -> None:
        if self.current is None:
            return
        topic, partition = self.current
        for stat, n in (
            (Stat.RECORDS_IN, self.n_in),
            (Stat.RECORDS_CARRIED_IN, self.n_carried_in),
            (Stat.RECORDS_CONSUMED, self.n_consumed),
        ):
            if n:
                self.sink.stats[(topic, partition, str(stat))] += n
        self.n_in = self.n_carried_in = self.n_consumed = 0

    def finish(self) -> None:
        """End of the current stream: what its decoder carries to the next hour. Every record
        it still holds must be in that carry; one that is not was lost by the decoder."""
        if self.dec is None or self.current is None:
            return
        lane, self.lane = self.lane, None
        if lane is not None:
            held = lane.release()
            if held is not None:
                self._decode(held)
            lane.close()
        self._add_stream_counts()
        topic, partition = self.current
        sink = self.sink
        try:
            out = self.dec.finish()
        except Exception as err:  # noqa: BLE001 - a decoder bug must not lose records
            out = []
            sink.stats[(topic, partition, Stat.DECODER_FINISH_ERRORS)] += 1
            sink.stats[(topic, partition, finish_error(err))] += 1
            for r in list(sink.held.values()):
                sink.bad(r, f"decoder error at the end of the hour: {type(err).__name__}: {err}")
        self._count_consumed(None)
        for r in out:
            k = (r.topic, r.partition, r.offset)
            # a record quarantined this hour is accounted for: carrying it too would decode it
            # (and quarantine it) again next hour, counting it twice
            if k in sink.quarantined:
                sink.count(r, Stat.CARRY_SKIPPED_QUARANTINED)
                continue
            sink.held.pop(k, None)
            sink.count(r, Stat.RECORDS_CARRIED_OUT)
            self.carry.append(r)
        for r in list(sink.held.values()):
            sink.lost(
                r,
                f"lost by the {self.fmt} decoder: neither emitted, carried nor quarantined "
                "(a bug: the bytes are kept here, the hour's identity fails)",
            )
        sink.held.clear()
        sink.quarantined.clear()
        for spill in sink.open_spills:  # an open transaction's events: its records are carried
            spill.drop()
        sink.open_spills.clear()
        for values in sink.value_spills:  # ... with their values, read at the next drain
            values.closed = True
        self.ended.add(self.current)
        self.dec = None

    def drain(self) -> Iterator[pa.RecordBatch]:
        """The output so far: committed transactions' spilled events a chunk at a time, then
        what is in memory."""
        self.pending_bytes = 0
        spilled, self.sink.spilled = self.sink.spilled, []
        for spill, txn_id in spilled:
            try:
                for chunk in spill.chunks():
                    if txn_id:  # as `TxnAssembler.commit` names the events it holds
                        for ev in chunk:
                            ev.txn_id = ev.txn_id or txn_id
                    yield _event_batch(chunk, "event")
                    if self.shapes:
                        yield _shape_batch(chunk, {})
            finally:
                spill.drop()
        yield from _drain(self.sink, self.carry, self.lane_rows, self.shapes)
        done = [v for v in self.sink.value_spills if v.closed]  # their values are written out
        for v in done:
            self.sink.value_spills.remove(v)
            v.drop()

    def stat_rows(self) -> list[dict[str, object]]:
        """The counters as output rows, each at most the int64 column's largest value: a
        producer's numbers can count past it (a Tencent seqId that jumps by 2^63 counts that
        many entries missing), and a count that does not fit must not fail the task."""
        return [
            {"kind": "stat", "topic": t, "partition": p, "stat": stat, "n": min(n, INT64_MAX)}
            for (t, p, stat), n in sorted(self.sink.stats.items())
        ]


def records_of(batch: pa.RecordBatch) -> Iterator[RawRecord]:
    return records_from(raw_columns(batch))


def raw_columns(batch: pa.RecordBatch) -> list[list[Any]]:
    """A raw-record batch's columns as lists, in RawRecord's field order."""
    return [batch.column(n).to_pylist() for n in _RAW_NAMES]


class BinaryRows(Sequence[bytes | None]):
    """Rows of a binary Arrow array (those at `rows`, else all), as a run's column: bytes (None
    for a NULL) one at a time for Python, and straight from the array's buffers for the lanes'
    C record loops (`native`, read by `_run_values.h`), so that the rows the loops read need no
    bytes object each (nor a filtered copy of the array: reading a partition out of a dump file
    that holds several)."""

    __slots__ = ("array", "rows", "native")

    def __init__(self, array: pa.Array, rows: np.ndarray | None = None) -> None:
        if array.type != pa.binary():  # the C reads take int32 offsets
            raise TypeError(f"BinaryRows of a binary array, not {array.type}")
        self.array = array
        self.rows = None if rows is None else np.ascontiguousarray(rows, np.int64)
        validity, offsets, data = array.buffers()
        self.native = (offsets, data, validity, self.rows, array.offset, len(array))

    def __len__(self) -> int:
        return len(self.array) if self.rows is None else len(self.rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            rows = self.array[i] if self.rows is None else self.array.take(self.rows[i])
            return rows.to_pylist()
        return self.array[i if self.rows is None else int(self.rows[i])].as_py()

    def __iter__(self) -> Iterator[bytes | None]:
        rows = self.array if self.rows is None else self.array.take(self.rows)
        return iter(rows.to_pylist())


def native_column(col: Sequence[Any]) -> Any:
    """A run's column as the lanes' C loops take it: a list, or `BinaryRows.native`."""
    return col.native if type(col) is BinaryRows else col


def run_columns(rest: pa.RecordBatch, values: BinaryRows) -> list[Sequence[Any]]:
    """`raw_columns` of a raw-record batch's rows less their values (`rest`), with `values`
    (the same rows') in their place."""
    cols: list[Sequence[Any]] = [rest.column(n).to_pylist() for n in _RAW_NAMES if n != "value"]
    cols.insert(_RAW_NAMES.index("value"), values)
    return cols


def records_from(cols: Sequence[Sequence[Any]]) -> Iterator[RawRecord]:
    """The raw records of columns in RawRecord's field order (`raw_columns`)."""
    for topic, part, offset, key, value, ts_ms, headers, carried, skip in zip(*cols, strict=True):
        yield RawRecord(topic, part, offset, key, value, ts_ms, headers, bool(carried), skip or 0)


def record_at(cols: Sequence[Sequence[Any]], i: int) -> RawRecord:
    """The raw record of row `i` of columns in RawRecord's field order (`raw_columns`)."""
    topic, part, offset, key, value, ts_ms, headers, carried, skip = (c[i] for c in cols)
    return RawRecord(topic, part, offset, key, value, ts_ms, headers, bool(carried), skip or 0)


def value_sizes(values: Sequence[bytes | None], start: int, end: int) -> np.ndarray:
    """The byte sizes of `values[start:end]` (0 for a NULL), from an Arrow array's offsets
    where the column is one (`BinaryRows`)."""
    if isinstance(values, BinaryRows):
        offsets = np.frombuffer(values.native[0], np.int32)[values.array.offset :]
        lens = np.diff(offsets[: len(values.array) + 1]).astype(np.int64)
        rows = values.rows[start:end] if values.rows is not None else slice(start, end)
        return lens[rows]
    return np.fromiter(
        (len(v) if v is not None else 0 for v in values[start:end]), np.int64, end - start
    )


class RawRun:
    """Records of one (topic, partition) in offset order, none carried in and none to skip:
    rows `start` to `end` of raw columns (`raw_columns`), fed to the stream driver whole
    (`_StreamDriver.feed_run`), so that a lane's record loop reads them without a `RawRecord`
    per record."""

    __slots__ = ("cols", "start", "end")

    def __init__(
        self, cols: Sequence[Sequence[Any]], start: int = 0, end: int | None = None
    ) -> None:
        self.cols = cols
        self.start = start
        self.end = len(cols[0]) if end is None else end

    def record(self, i: int) -> RawRecord:
        return record_at(self.cols, i)

    def records(self) -> Iterator[RawRecord]:
        return records_from([c[self.start : self.end] for c in self.cols])


def runs_of(batch: pa.RecordBatch) -> Iterator[RawRun] | Iterator[RawRecord]:
    """A raw-record batch (`RAW_SCHEMA`, sorted by topic, partition and offset) as a `RawRun`
    per partition it holds; its records one by one when any is carried in or has entries to
    skip (`records_of`)."""
    if batch.column("carried").true_count or pc.max(batch.column("skip")).as_py():
        return records_of(batch)
    return _runs_of(raw_columns(batch))


def _runs_of(cols: Sequence[Sequence[Any]]) -> Iterator[RawRun]:
    topics, partitions = cols[0], cols[1]
    start = 0
    for i in range(1, len(topics)):
        if partitions[i] != partitions[i - 1] or topics[i] != topics[i - 1]:
            yield RawRun(cols, start, i)
            start = i
    if start < len(topics):
        yield RawRun(cols, start, len(topics))


def flat_records(items: Iterable[RawRecord | RawRun]) -> Iterator[RawRecord]:
    """The records of records and runs (`RawRun`), in turn."""
    for item in items:
        if type(item) is RawRun:
            yield from item.records()
        else:
            yield item  # type: ignore[misc]


def decode_stream(
    batches: Iterable[pa.RecordBatch], fmt: str, ctx: DecodeContext, shapes: bool = False
) -> Iterator[pa.RecordBatch]:
    """Decode raw-record batches (`RAW_SCHEMA`) sorted by (topic, partition, offset)."""
    return decode_raw(chain.from_iterable(map(records_of, batches)), fmt, ctx, shapes)


INT64_MAX = 2**63 - 1
"""The largest count an output row holds (`stat_rows`)."""
_GC_YOUNG = 50_000
"""Allocations between collections of the youngest generation while decoding (Python's
default: 700)."""


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Python's cyclic garbage collector runs less often while a stream is decoded. A decoder
    allocates a few containers per record, and the events it keeps until a flush (up to
    `_FLUSH_ROWS`) survive into older generations that each collection scans again: ~0.5 s
    of a ~7 s DataWorks decode task at the default thresholds (measured with `gc.callbacks`,
    250k records), ~0.07 s with this one. Memory stays bounded: a record's objects are freed by
    reference counting as before; only cycles wait longer. The objects alive before decoding
    (modules, classes) are frozen out of the scans. Both are undone at the end."""
    young, *older = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(young, _GC_YOUNG), *older)
    try:
        yield
    finally:
        gc.set_threshold(young, *older)
        gc.unfreeze()


def decode_raw(
    records: Iterable[RawRecord | RawRun],
    fmt: str,
    ctx: DecodeContext,
    shapes: bool = False,
    lanes: bool = True,
) -> Iterator[pa.RecordBatch]:
    """Decode raw records (or runs of them: `RawRun`) sorted by (topic, partition, offset):
    output batches of `OUTPUT_SCHEMA` (events, quarantine, carry, then the counters);
    `shapes`: with the shapes of each batch's events (`_shape_batch`), for the decode task's
    summary; `lanes`: with the decoders' fast lanes (`recon.decode.lane`; without, for tests:
    the same output)."""
    driver = _StreamDriver(fmt, ctx, shapes, lanes)
    with _fewer_collections():
        for rec in records:
            if type(rec) is RawRun:
                yield from driver.feed_run(rec)
                continue
            driver.feed(rec)  # type: ignore[arg-type]
            if driver.full():
                yield from driver.drain()
        driver.finish()
        yield from driver.drain()
    stats = driver.stat_rows()
    if stats:
        yield pa.RecordBatch.from_pylist(stats, schema=OUTPUT_SCHEMA)


def decode_records(
    records: list[RawRecord], fmt: str, ctx: DecodeContext | None = None
) -> pa.Table:
    """Decode an in-memory list of records (sorted here), for tests and small tools."""
    recs = sorted(records, key=lambda r: (r.topic, r.partition, r.offset))
    batch = pa.RecordBatch.from_pylist(
        [{n: getattr(r, n) for n in _RAW_NAMES} for r in recs], schema=RAW_SCHEMA
    )
    out = list(decode_stream([batch], fmt, ctx or DecodeContext()))
    return pa.Table.from_batches(out, schema=OUTPUT_SCHEMA)


def with_carried(
    records: Iterable[RawRecord], carried: dict[tuple[str, int], list[RawRecord]]
) -> Iterator[RawRecord]:
    """The hour's records (sorted by topic, partition, offset) with the carried-in records of
    their partitions (`carried`: sorted by offset per partition) merged in by offset, a carried
    record before an hour's record of the same offset. Carried records of partitions that
    `records` does not hold are left out (another task decodes those)."""
    current: tuple[str, int] | None = None
    pending: deque[RawRecord] = deque()
    for rec in records:
        key = (rec.topic, rec.partition)
        if key != current:
            yield from pending  # the rest of the partition before: offsets after the hour's
            current = key
            pending = deque(carried.get(key, ()))
        while pending and pending[0].offset <= rec.offset:
            yield pending.popleft()
        yield rec
    yield from pending
