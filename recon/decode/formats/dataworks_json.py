"""Alibaba Cloud DataWorks real-time sync to Kafka JSON (docs/formats.md; section 5).

An UPDATE arrives as UPDATE_BEFOR + UPDATE_AFTER sharing one sequenceId (joined here into one
update; an UPDATE_BEFOR still waiting at the end of the hour is carried over), or as one
UPDATE_AFTER record holding both images. sequenceId is compared as a number. MHEARTBEAT is counted
and dropped. DATE values are epoch milliseconds (an instant: typed timestamp, UTC); BYTES are
base64 already.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import orjson

from recon.core.model import Event, Op, RawRecord, i64
from recon.core.order import decimal_text_number, kafka_tail, u128
from recon.core.values import number_text, timestamp_utc
from recon.decode.base import (
    DecodeContext,
    JsonStreamDecoder,
    PerObject,
    SharedMemberJson,
    Sink,
    text_list,
)
from recon.decode.formats.native import native_module
from recon.decode.lane import Lane, LaneRows, opening_specs
from recon.decode.stats import Stat, non_dml
from recon.decode.stream import native_column
from recon.errors import DecodeError

_native = native_module("_dataworks_lane")

_TYPES = {
    "LONG": "int64",
    "DOUBLE": "float64",
    "STRING": "string",
    "DATE": "timestamp",
    "BYTES": "binary",
    "BOOLEAN": "bool",
}
_DDL_OPS = {"CREATE", "ALTER", "ERASE", "TRUNCATE", "RENAME", "CINDEX", "DINDEX"}
_CONTROL_OPS = {"TRANSACTION_BEGIN", "TRANSACTION_END", "QUERY", "GTID", "XACOMMIT", "XAROLLBACK"}
_PAIRED = ("UPDATE_BEFOR", "UPDATE_AFTER")
_ROW_OPS = frozenset(("INSERT", "DELETE", *_PAIRED))
_NEEDS = {"INSERT": "after", "DELETE": "before", "UPDATE_BEFOR": "before", "UPDATE_AFTER": "after"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@lru_cache(maxsize=4096)
def _instant_text(ms: int) -> str:
    """Epoch milliseconds as canonical UTC text (cached: a DATE column's values repeat, and
    formatting one costs more than the rest of its record)."""
    return timestamp_utc(_EPOCH + timedelta(milliseconds=ms))


@lru_cache(maxsize=1024)
def _column_types(columns_json: bytes) -> dict[str, str]:
    """Column -> logical type from `schema.dataColumn` (as JSON bytes, the key it is cached by:
    a table's messages repeat the list, and reading it was a tenth of the decode). Callers
    copy the result before changing it."""
    return {
        str(c["name"]): _TYPES.get(str(c.get("type")).upper(), "unknown")
        for c in orjson.loads(columns_json)
        if isinstance(c, dict) and "name" in c
    }


def _schema_columns(schema: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """(column -> logical type, primary key) of a message's `schema` (a shared object)."""
    return _column_types(orjson.dumps(schema.get("dataColumn") or [])), text_list(
        schema.get("primaryKey"), "schema.primaryKey"
    )


def _source(schema: dict[str, Any]) -> tuple[str, str]:
    """(database, table) of a message's `schema` (a shared object)."""
    source = schema.get("source") or {}
    return str(source.get("dbName") or source.get("schemaName") or ""), str(
        source.get("tableName") or ""
    )


_SCHEMA_COLUMNS = PerObject(_schema_columns)
_SOURCE = PerObject(_source)
_PARSE = SharedMemberJson("schema")
_NO_SCHEMA: dict[str, Any] = {}


def _value(v: object, logical: str) -> str | None:
    if type(v) is str:  # the common case first (a string is kept, whatever the column)
        return v
    if v is None:
        return None
    if logical == "timestamp" and type(v) is int:  # not a bool
        return _instant_text(v)
    if isinstance(v, (int, float, bool)):
        return number_text(v)
    return orjson.dumps(v).decode()


def _image_columns(part: Any, which: str) -> dict[str, Any] | None:
    """`payload[which].dataColumn` of an image `part` (None: no such image)."""
    if part is None:
        return None
    cols = part.get("dataColumn") if type(part) is dict else None
    if type(cols) is not dict:
        raise DecodeError(f"`{which}.dataColumn` is not an object")
    return cols


def _typed(cols: dict[str, Any] | None, types: dict[str, str]) -> dict[str, str | None] | None:
    """An image's values as text by their column's type; a string is kept whatever its column
    (the common case, tested inline: a call per value was a tenth of the decode)."""
    if cols is None:
        return None
    return {c: v if type(v) is str else _value(v, types[c]) for c, v in cols.items()}


class DataworksJsonDecoder(JsonStreamDecoder):
    format_name = "dataworks_json"
    label = "DataWorks message"

    def __init__(self, ctx: DecodeContext, sink: Sink) -> None:
        super().__init__(ctx, sink)
        self.pending: dict[str, tuple[RawRecord, Event]] = {}
        self.passed: set[str] = set()
        """Waiting UPDATE_BEFORs followed in their partition by another row change."""
        self.unfollowed: set[str] = set()
        """Waiting UPDATE_BEFORs no record has followed yet."""

    def accepts(self, msg: Any) -> str | None:
        if not isinstance(msg, dict) or not isinstance(msg.get("payload"), dict):
            return "no `payload` object"
        return None

    def parse(self, value: bytes) -> Any:
        return _PARSE(value)

    def handle(self, rec: RawRecord, msg: dict[str, Any]) -> None:
        payload = msg["payload"]
        op = str(payload.get("op") or "")
        if op == "MHEARTBEAT":
            self.sink.count(rec, Stat.HEARTBEATS)
            return
        if op in _CONTROL_OPS:
            self.sink.count(rec, non_dml(op))
            return
        schema = msg.get("schema") or _NO_SCHEMA
        db, tbl = _SOURCE(schema)
        seq_text = payload.get("sequenceId")
        seq = decimal_text_number(seq_text)
        if seq is None:
            self.sink.count(rec, Stat.SEQUENCE_ID_NOT_NUMERIC)
            seq = 0
        ts = payload.get("timestamp")
        event_time = ts.get("eventTime") if isinstance(ts, dict) else None
        event_time_ms = i64(event_time, "eventTime") if type(event_time) is int else None
        seq_str = None if seq_text is None else str(seq_text)
        tail = kafka_tail(rec.partition, rec.offset)
        if op in _DDL_OPS:
            ddl = payload.get("ddl") or {}
            text = str(ddl.get("text") or "") if isinstance(ddl, dict) else ""
            self.sink.events.append(
                Event(
                    db=db,
                    tbl=tbl,
                    op="ddl",
                    ddl=text,
                    order_key=u128(seq) + b"\x01" + tail,
                    seq=seq_str,
                    event_time_ms=event_time_ms,
                    topic=rec.topic,
                    partition=rec.partition,
                    offset=rec.offset,
                )
            )
            return
        if op not in ("INSERT", "DELETE", "UPDATE_BEFOR", "UPDATE_AFTER"):
            raise DecodeError(f"unknown op {op!r}")
        flag = b"\x00" if op == "UPDATE_BEFOR" else b"\x01"
        key = u128(seq) + flag + tail
        ev = self._row_event(schema, payload, db, tbl, key, rec, seq_str, event_time_ms)
        pair_key = f"{db}.{tbl}:{seq_text}" if op in _PAIRED else ""  # an update's two records
        self._apply(rec, op, ev, pair_key)

    def _row_event(
        self,
        schema: dict[str, Any],
        payload: dict[str, Any],
        db: str,
        tbl: str,
        order_key: bytes,
        rec: RawRecord,
        seq: str | None,
        event_time_ms: int | None,
    ) -> Event:
        """The row change with both images typed (its op is settled by `_apply`)."""
        # the cached dict is shared by every message of the table; copied only when an image
        # adds columns the schema does not declare (a copy per message was ~4% of the decode)
        types, pk = _SCHEMA_COLUMNS(schema)
        if not pk:
            pk = list(self.ctx.primary_keys.get(f"{db}.{tbl}", []))
        get = payload.get
        cols_b = _image_columns(get("before"), "before")
        cols_a = _image_columns(get("after"), "after")
        for cols in (cols_b, cols_a):
            if cols is not None and not types.keys() >= cols.keys():
                types = dict(types)
                for c, v in cols.items():
                    if c not in types:
                        types[c] = "int64" if isinstance(v, int) else "string"
        return Event(
            db=db,
            tbl=tbl,
            op="insert",
            pk=pk,
            before=_typed(cols_b, types),
            after=_typed(cols_a, types),
            types=types,
            order_key=order_key,
            seq=seq,
            event_time_ms=event_time_ms,
            topic=rec.topic,
            partition=rec.partition,
            offset=rec.offset,
        )

    def _apply(self, rec: RawRecord, op: str, ev: Event, pair_key: str) -> None:
        """Emit an insert or delete; hold an UPDATE_BEFOR for its UPDATE_AFTER (same
        sequenceId), and join the two into one update."""
        if op == "INSERT":
            if ev.after is None:
                raise DecodeError("INSERT without `after`")
            ev.op = "insert"
        elif op == "DELETE":
            if ev.before is None:
                raise DecodeError("DELETE without `before`")
            ev.op = "delete"
        elif op == "UPDATE_BEFOR":
            if ev.before is None:
                raise DecodeError("UPDATE_BEFOR without `before`")
            earlier = self.pending.get(pair_key)
            if earlier is not None:
                self.sink.count(rec, Stat.UPDATE_BEFOR_REPEATED)
                self.sink.bad(
                    earlier[0],
                    f"repeated UPDATE_BEFOR: another one for {pair_key} came at offset "
                    f"{rec.offset} before an UPDATE_AFTER (the later one is paired)",
                )
            self.pending[pair_key] = (rec, ev)
            self.sink.hold(rec)
            return
        else:  # UPDATE_AFTER
            if ev.after is None:
                raise DecodeError("UPDATE_AFTER without `after`")
            ev.op = "update"
            self._join_pair(rec, ev, pair_key)
        self.sink.events.append(ev)

    def _join_pair(self, rec: RawRecord, ev: Event, pair_key: str) -> None:
        pair = self.pending.pop(pair_key, None)
        if pair is None:
            if ev.before is None:
                # its UPDATE_BEFOR never came: apply the after image as an upsert
                self.sink.count(rec, Stat.UPDATE_AFTER_UNPAIRED)
            return
        self.sink.consume(pair[0])
        if ev.before is None:
            ev.before = pair[1].before
        if pair[1].types is not ev.types:  # most pairs share their table's cached types
            ev.types = {**pair[1].types, **ev.types}
        self.sink.count(rec, Stat.UPDATE_PAIRS_JOINED)

    def feed(self, rec: RawRecord) -> None:
        # the record right after a waiting UPDATE_BEFOR decides: the producer writes an
        # update's AFTER right after its BEFOR, so another row change there means the AFTER
        # went to another partition; a damaged or control record proves nothing (it waits)
        if not self.unfollowed:  # no UPDATE_BEFOR waits for its next record (most records)
            super().feed(rec)
            if self.pending:
                self._mark_waiting(rec)
            return
        first = {k: r for k, (r, _) in self.pending.items() if k in self.unfollowed}
        emitted = len(self.sink.events)
        super().feed(rec)
        row_change = len(self.sink.events) > emitted or any(
            r is rec for r, _ in self.pending.values()
        )
        for k, r in first.items():
            self.unfollowed.discard(k)
            if row_change and k in self.pending and self.pending[k][0] is r:
                self.passed.add(k)
        self._mark_waiting(rec)

    def _mark_waiting(self, rec: RawRecord) -> None:
        """An UPDATE_BEFOR `rec` just left waiting: no record has followed it yet."""
        for k, (r, _) in self.pending.items():
            if r is rec:
                self.unfollowed.add(k)
                self.passed.discard(k)

    def finish(self) -> list[RawRecord]:
        """An UPDATE_BEFOR still waiting that another row change followed in its partition has no
        partner in this partition (see `feed`): a topic partitioned by primary key puts a
        key-changing update's AFTER (new key) in another partition. It is applied alone, as the
        removal of its key ordered just before its AFTER (its order key): whatever the AFTER did,
        the merge then ends right (same key: the AFTER's upsert wins; another key: the old one is
        gone). One that is the partition's last record of the hour is carried (its AFTER may be cut
        off by the hour) and offered to the decode stage, which applies it in this hour when its
        AFTER (same table and sequenceId) came in another partition of the hour."""
        carry = []
        for key, (rec, ev) in self.pending.items():
            if key in self.passed:
                ev.op, ev.after = "delete", None
                self.sink.events.append(ev)
                self.sink.consume(rec)
                self.sink.count(rec, Stat.UPDATE_BEFOR_APPLIED_ALONE)
                continue
            rec.skip = 0
            carry.append(rec)
            self.sink.count(rec, Stat.UPDATE_BEFOR_CARRIED)
            # its AFTER may be in another partition of this hour: the decode stage pairs them
            ev.op, ev.after = "delete", None
            self.sink.shadows.append(ev)
        self.pending.clear()
        self.passed.clear()
        self.unfollowed.clear()
        return carry


_Read = tuple[str, tuple[Any, ...], str, Any, Any]
"""A row change's record as the lane reads it (`DataworksLane.read`): its op, its row (the
`LANE_COLUMNS` values), the key that pairs an update's two records, its before and after
images (each (column names, values as text), or None)."""


class DataworksLane(Lane):
    """The DataWorks decoder's fast lane (`recon.decode.lane`): an INSERT, a DELETE, an
    UPDATE_AFTER with both images, and an UPDATE_BEFOR right before its UPDATE_AFTER (how the
    producer writes an update: the lane holds the BEFOR for the next record, and joins the two
    into one update as the decoder would). Everything else goes to the decoder: control and DDL
    records, damage, an UPDATE_AFTER alone, columns the schema does not declare, a carried
    record, and every record while the decoder holds an UPDATE_BEFOR."""

    dec: DataworksJsonDecoder

    def __init__(self, dec: DataworksJsonDecoder, rows: LaneRows) -> None:
        super().__init__(dec, rows)
        self.held: tuple[RawRecord, _Read] | None = None
        self.parse = dec.parse
        self.schema: Any = None
        self.table: _LaneTable = _LANE_TABLE(_NO_SCHEMA)
        """What the lane knows of the table of `schema` (the last message's)."""
        self.sink = rows.sink()

    def idle(self) -> bool:
        return not self.dec.pending

    def take(self, rec: RawRecord) -> int | None:
        got = self.attempt(rec)
        if got is None:
            return None
        op, row, pair_key, before, after = got
        held = self.held
        if held is not None:  # only its UPDATE_AFTER joins it; any other record: the decoder's
            _, (_, held_row, held_key, held_before, _) = held
            # the decoder merges two records' column types that are not the same object
            if op != "UPDATE_AFTER" or held_key != pair_key or held_row[3] is not row[3]:
                return None
            self.held = None
            self.count(rec, Stat.UPDATE_PAIRS_JOINED)
            self.emit("update", row, held_before if before is None else before, after)
            return 2
        if op == "UPDATE_BEFOR":
            self.held = (rec, got)
            return 0
        if op == "UPDATE_AFTER" and before is None:  # unpaired: the decoder counts it
            return None
        self.emit(_KIND[op], row, before, after)
        return 1

    def run(
        self, cols: Sequence[Sequence[Any]], start: int, end: int, budget: int
    ) -> tuple[int, int]:
        """`Lane.run` by C (`_dataworks_lane.run`: `take` of each record whose `read` C
        answers, an UPDATE_BEFOR with the UPDATE_AFTER right after it)."""
        if _native is None or self.held is not None or not self.idle():
            return start, 0
        recent = opening_specs(_PARSE.recent, _native_spec_of)
        topic, partition = cols[0][start], cols[1][start]
        stop, consumed, pairs = _native.run(
            native_column(cols[4]), cols[2], start, end, budget, recent, topic, partition,
            self.sink, _RUN_KINDS,
        )  # fmt: skip
        if pairs:
            self.count_in((topic, partition), Stat.UPDATE_PAIRS_JOINED, pairs)
        return stop, consumed

    def read(self, rec: RawRecord) -> _Read | None:
        """The record's row change as C reads it (`_dataworks_lane.read`: a message whose
        schema text the decoder's parse has seen); None for any other, which the decoder then
        reads."""
        value = rec.value
        if not value or _native is None:
            return None
        known = _PARSE.known_opening(value)
        if known is None:
            return None
        table = self.table_of(known[0] or _NO_SCHEMA)
        if table.native is None:
            return None
        return _native.read(value, known[1], table.native, rec.topic, rec.partition, rec.offset)

    def table_of(self, schema: Any) -> _LaneTable:
        if schema is not self.schema:  # most messages share their table's schema object
            self.table = _LANE_TABLE(schema)
            self.schema = schema
        return self.table

    def release(self) -> RawRecord | None:
        held, self.held = self.held, None
        return None if held is None else held[0]


DataworksJsonDecoder.lane = DataworksLane
_KIND: dict[str, Op] = {"INSERT": "insert", "DELETE": "delete", "UPDATE_AFTER": "update"}
_RUN_KINDS = (_KIND["INSERT"], _KIND["DELETE"], _KIND["UPDATE_AFTER"])
"""`_KIND`'s ops in the order `_dataworks_lane.run` takes them."""


class _LaneTable:
    """What the lane reads from a table's `schema` object (`_SOURCE`, `_SCHEMA_COLUMNS`), and
    its images' values as text (`_typed`); read once per object (`_LANE_TABLE`: a partition's
    messages may take turns between tables)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.db, self.tbl = _SOURCE(schema)
        self.types, self.pk = _SCHEMA_COLUMNS(schema)
        self.pairs = f"{self.db}.{self.tbl}:"
        """The start of the key that pairs an update's two records (`handle`'s)."""
        spec = _native_spec(self.types) if self.pk else None  # keyless: not the lane's
        self.native = (
            None if spec is None else (*spec, self.db, self.tbl, self.pk, self.types, self.pairs)
        )
        """What the C read needs (`_dataworks_lane.c`'s spec): the columns' names (as str and
        UTF-8), how C writes their integers (0: decimal text, 6: a DATE's instant), and what
        its rows hold of the table (db, tbl, key, types; the pair key's prefix); None: C does
        not read this table's messages (a table without a key, which the lane leaves too)."""


_LANE_TABLE = PerObject(_LaneTable)


def _native_spec_of(schema: Any) -> tuple[Any, ...] | None:
    """The C read's spec of the messages of `schema` (`DataworksLane.read`'s)."""
    return _LANE_TABLE(schema or _NO_SCHEMA).native


def _native_spec(types: dict[str, str]) -> tuple[Any, ...] | None:
    """`_LaneTable.native` of a table's column types (None: a column name that is not UTF-8,
    or more columns than C reads)."""
    if len(types) > 4096:  # MAX_COLUMNS
        return None
    try:
        utf8 = tuple(c.encode() for c in types)
    except UnicodeEncodeError:
        return None
    kinds = bytes(6 if t == "timestamp" else 0 for t in types.values())
    return tuple(types), utf8, kinds
