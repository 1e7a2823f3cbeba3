"""Tencent Cloud DTS subscription, protobuf (docs/formats.md; section 1).

Kafka value = Envelope{total, index, data}; the `data` of segments 0..total-1 of one partition,
concatenated, is a serialized Entries{items: Entry...}. Each Entry is BEGIN / DML / COMMIT / DDL /
HEARTBEAT / CHECKPOINT. DML rows are positional `oldColumns`/`newColumns` aligned with `columns`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError as PbDecodeError

from recon._proto import tencent_subscribe_pb2 as pb
from recon.core.ddl import ddl_target
from recon.core.model import Event, Op, RawRecord, i64
from recon.core.order import binlog_file_number, binlog_key, kafka_tail, u32, u64
from recon.core.sqlddl import split_qualified
from recon.core.values import b64, mysql_logical_type, normalize_datetime_text, parse_timestamp_text
from recon.decode.base import DecodeContext, Sink, StreamDecoder, TxnAssembler
from recon.decode.formats.native import native_module
from recon.decode.lane import Lane, LaneRows
from recon.decode.stats import Stat
from recon.decode.stream import native_column, record_at
from recon.errors import DecodeError

_native = native_module("_tencent_lane")

# MySQL charset names -> Python codecs (formats.md 1.3: MySQL latin1 is really cp1252).
_CHARSETS = {
    "utf8": "utf-8",
    "utf8mb3": "utf-8",
    "utf8mb4": "utf-8",
    "latin1": "cp1252",
    "gbk": "gbk",
    "gb2312": "gb2312",
    "gb18030": "gb18030",
    "big5": "big5",
    "ascii": "ascii",
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf32": "utf-32-be",
    "": "utf-8",
}

_DT_LOGICAL = {
    pb.INT8: "int8",
    pb.INT16: "int16",
    pb.INT32: "int32",
    pb.INT64: "int64",
    pb.UINT8: "uint8",
    pb.UINT16: "uint16",
    pb.UINT32: "uint32",
    pb.UINT64: "uint64",
    pb.FLOAT32: "float32",
    pb.FLOAT64: "float64",
    pb.DECIMAL: "decimal(65,30)",
    pb.STRING: "string",
    pb.BYTES: "binary",
}
_OPS: dict[int, Op] = {pb.INSERT: "insert", pb.UPDATE: "update", pb.DELETE: "delete"}


_NA, _NIL, _BYTES, _STRING = pb.NA, pb.NIL, pb.BYTES, pb.STRING
_TEXT_LOGICAL = frozenset(("json", "string", "enum", "set"))


@functools.lru_cache(maxsize=256)
def _codec(charset: str) -> str | None:
    """A `Data.charset` -> its Python codec; None for `binary` (the bytes are the value)."""
    cs = charset.lower()
    return None if cs == "binary" else _CHARSETS.get(cs, cs)


def _value(d: pb.Data, dt: int, logical: str) -> str | None:
    """One `Data` (of `dataType` `dt`) -> canonical text. NIL is NULL; the caller drops NA."""
    if dt == _STRING:
        charset = d.charset
        codec = _codec(charset)
        bv = d.bv
        if codec is None:
            return b64(bv)
        try:
            text = bv.decode(codec) if bv or not (sv := d.sv) else sv
        except (LookupError, UnicodeDecodeError) as err:
            raise DecodeError(f"undecodable string: charset {charset!r}: {err}") from None
        if logical == "timestamp":
            return parse_timestamp_text(text) or text
        if logical == "datetime":
            return normalize_datetime_text(text)
        return text
    if dt == _NIL:
        return None
    if dt == _BYTES:
        if logical in _TEXT_LOGICAL:
            return d.bv.decode("utf-8", errors="strict")
        return b64(d.bv)
    return d.sv


def _image(
    datas: Any, names: list[str], logical: list[str], key: str
) -> tuple[dict[str, str | None], bool]:
    """One row image (`oldColumns` or `newColumns`): column name -> canonical text, and whether
    its columns' types are the event's declared ones (every column there, none `unknown`: most
    rows), so the row can share its table's types (`_fill_types` otherwise)."""
    if len(datas) > len(names):
        raise DecodeError(
            f"{key}: row has {len(datas)} values but the event names {len(names)} columns"
        )
    img: dict[str, str | None] = {}
    declared = len(datas) == len(names)
    # no more values than names (checked above): a row may leave out the last columns
    for d, name, lt in zip(datas, names, logical, strict=False):
        dt = d.dataType
        if dt == _NA:
            declared = False
            continue  # not in this image (minimal row image): not NULL
        if lt == "unknown":
            declared = False
            lt = _DT_LOGICAL.get(dt, "unknown")
        img[name] = _value(d, dt, lt)
    return img, declared


def _fill_types(datas: Any, names: list[str], logical: list[str], types: dict[str, str]) -> None:
    """The logical type of each column an image holds, into `types` (an `unknown` declared
    type is the value's `dataType`'s)."""
    for d, name, lt in zip(datas, names, logical, strict=False):
        dt = d.dataType
        if dt == _NA:
            continue
        types[name] = _DT_LOGICAL.get(dt, "unknown") if lt == "unknown" else lt


@dataclass(frozen=True, slots=True)
class _Columns:
    """What the events of one column list share (`DMLEvent.columns`, read once per list)."""

    names: list[str]
    logical: list[str]
    pk: list[str]
    """The columns marked `isKey` (empty: none marked)."""
    types: dict[str, str]
    """Every column's logical type: the types of a row holding every column, none `unknown`
    (shared by those rows' events: not to be changed)."""


def _column_bytes_pool() -> descriptor_pool.DescriptorPool:
    """The protocol with each `DMLEvent.columns` read as its bytes, not as a `Column`: the
    events of a table repeat one column list, and its bytes are the key of what it says
    (`_columns`), where reading every column's three fields to make that key was a tenth of the
    decode. The wire format is the same (a message field is length-delimited bytes)."""
    fdp = descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(fdp)
    fdp.name = "recon/tencent_subscribe_column_bytes.proto"
    (dml,) = [m for m in fdp.message_type if m.name == "DMLEvent"]
    (columns,) = [f for f in dml.field if f.name == "columns"]
    columns.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    columns.ClearField("type_name")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return pool


_POOL = _column_bytes_pool()
_Entries: Any = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("subscribe.Entries"))
_DmlColumns: Any = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("subscribe.DMLEvent")
)
"""A DMLEvent of `_column_bytes_pool`: the C read's column list (its `columns` fields) read."""


@functools.lru_cache(maxsize=1024)
def _columns(raw: tuple[bytes, ...]) -> _Columns:
    """`raw`: the serialized `Column`s of a `DMLEvent.columns` (`_column_bytes_pool`), the cache
    key; each is parsed here, once per distinct list."""
    spec = []
    for b in raw:
        c = pb.Column.FromString(b)  # a broken one: the group's Entries are not valid
        spec.append((c.name, c.originalType, c.isKey))
    names = [n for n, _, _ in spec]
    logical = [mysql_logical_type(t) for _, t, _ in spec]
    pk = [n for n, _, k in spec if k]
    return _Columns(names, logical, pk, dict(zip(names, logical, strict=True)))


def _entry_kind(h: pb.Header, ev: pb.Event) -> str:
    """What an entry is: `begin`, `commit`, `dml`, `ddl`, or the counter of a control entry."""
    if ev.HasField("beginEvent") or (h.messageType == pb.BEGIN and not ev.ListFields()):
        return "begin"
    if ev.HasField("commitEvent") or h.messageType == pb.COMMIT:
        return "commit"
    if ev.HasField("dmlEvent"):
        return "dml"
    if ev.HasField("ddlEvent"):
        return "ddl"
    if ev.HasField("heartbeatEvent") or h.messageType == pb.HEARTBEAT:
        return Stat.HEARTBEATS
    if ev.HasField("checkpointEvent") or h.messageType == pb.CHECKPOINT:
        return Stat.CHECKPOINTS
    if ev.HasField("rollbackEvent") or h.messageType == pb.ROLLBACK:
        return Stat.ROLLBACKS
    raise DecodeError(f"entry with messageType {h.messageType} and no event body")


class _DmlCommon:
    """What every row of a `DMLEvent` shares: its table, op, key, position and column list."""

    def __init__(self, ctx: DecodeContext, rec: RawRecord, h: pb.Header, dml: pb.DMLEvent) -> None:
        op = _OPS.get(dml.dmlEventType)
        if op is None:
            raise DecodeError(f"unknown dmlEventType {dml.dmlEventType}")
        self.op: Op = op
        spec = self.spec = _columns(tuple(dml.columns))
        self.db, self.tbl = h.schemaName, h.tableName
        self.key = f"{self.db}.{self.tbl}"
        self.pk = spec.pk or list(ctx.primary_keys.get(self.key, []))
        # its rows' order keys: the head and the Kafka tail around each row's index
        seq_id, file, self.pos = h.seqId, h.fileName, i64(h.position, "header position")
        self.head = u64(seq_id) + u64(binlog_file_number(file)) + u64(self.pos or 0)
        self.tail = kafka_tail(rec.partition, rec.offset)
        self.file = file or None
        self.gtid, self.seq, self.time_ms = h.gtid or None, str(seq_id), h.timestamp * 1000
        self.has_before, self.has_after = op in ("update", "delete"), op in ("update", "insert")

    def images(self, row: Any) -> tuple[Any, Any, dict[str, str]]:
        """A row's (before, after, column types)."""
        names, logical, key = self.spec.names, self.spec.logical, self.key
        before = after = None
        declared = True
        if self.has_before:
            before, declared = _image(row.oldColumns, names, logical, key)
        if self.has_after:
            after, whole = _image(row.newColumns, names, logical, key)
            declared = declared and whole
        if declared:
            return before, after, self.spec.types
        types: dict[str, str] = {}  # a column left out or of an undeclared type: the row's own
        if self.has_before:
            _fill_types(row.oldColumns, names, logical, types)
        if self.has_after:
            _fill_types(row.newColumns, names, logical, types)
        return before, after, types


class TencentDtsPbDecoder(StreamDecoder):
    format_name = "tencent_dts_pb"

    def __init__(self, ctx: DecodeContext, sink: Sink) -> None:
        super().__init__(ctx, sink)
        self.segments: list[RawRecord] = []
        self.seg_data: list[bytes] = []
        self.seg_total = 0
        self.txn = TxnAssembler(sink)
        self.last_seq = 0  # Header.seqId of the last entry (0: none yet / not numbered)

    # -- segments ---------------------------------------------------------------------------
    def _drop_segments(self, reason: str) -> None:
        for r in self.segments:
            self.sink.bad(r, reason)
        self.sink.count(self.segments[0], Stat.SEGMENTS_ORPHANED, len(self.segments))
        self.segments, self.seg_data, self.seg_total = [], [], 0

    def feed(self, rec: RawRecord) -> None:
        if rec.value is None:
            self.sink.bad(rec, "empty value: a Kafka record with no value is not an Envelope")
            return
        env = pb.Envelope()
        try:
            env.ParseFromString(rec.value)
        except PbDecodeError as err:
            self.sink.bad(rec, f"not a Tencent Envelope: {err}")
            return
        if env.version != 1:
            self.sink.bad(
                rec, f"unsupported Envelope.version {env.version}: only 1 (Entries) is defined"
            )
            return
        total, index = env.total or 1, env.index
        if index >= total:
            self.sink.bad(rec, f"bad segment header: index {index} of total {total}")
            return
        if index == 0:
            if self.segments:
                self._drop_segments(
                    f"orphan segment: envelope of {self.seg_total} segments cut off after "
                    f"{len(self.segments)} (a new envelope started at offset {rec.offset})"
                )
            if total == 1:
                self._decode_group([rec], env.data)
                return
            self.segments, self.seg_data, self.seg_total = [rec], [env.data], total
            self.sink.hold(rec)
            return
        # index > 0: must continue the open envelope
        if not self.segments or index != len(self.segments) or total != self.seg_total:
            if self.segments:
                self._drop_segments(
                    f"orphan segment: envelope of {self.seg_total} segments broken by segment "
                    f"{index}/{total} at offset {rec.offset}"
                )
            self.sink.bad(
                rec, f"orphan segment: segment {index} of {total} with no segment 0 before it"
            )
            self.sink.count(rec, Stat.SEGMENTS_ORPHANED)
            return
        self.segments.append(rec)
        self.seg_data.append(env.data)
        self.sink.hold(rec)
        if index == total - 1:
            group = self.segments
            data = b"".join(self.seg_data)
            self.segments, self.seg_data, self.seg_total = [], [], 0
            self.sink.count(group[0], Stat.ENVELOPES_REASSEMBLED)
            self.sink.count(group[0], Stat.SEGMENTS_REASSEMBLED, len(group))
            self._decode_group(group, data)

    # -- entries ----------------------------------------------------------------------------
    def _decode_group(self, group: list[RawRecord], data: bytes) -> None:
        entries = _Entries()
        try:
            entries.ParseFromString(data)
            events = self._entries(group, entries)
        except PbDecodeError as err:  # the Entries, or a column list read as it is met
            for r in group:
                self.sink.bad(r, f"Envelope.data is not a valid Entries message: {err}")
            return
        except DecodeError as err:
            for r in group:
                self.sink.bad(r, f"bad entry: {err}")
            return
        except Exception as err:  # noqa: BLE001 - every segment of the group, not the last only
            for r in group:
                self.sink.bad(r, f"decoder error: {type(err).__name__}: {err}")
            return
        if not events:
            self.sink.count(group[0], Stat.EMPTY_ENVELOPES)  # an Entries with no items
        self.txn.run_items(group, events)

    def _entries(self, group: list[RawRecord], entries: pb.Entries) -> list[tuple[str, Any]]:
        """Decode every item first, so a bad item quarantines the whole group, not half of it."""
        first = group[0]
        out: list[tuple[str, Any]] = []
        for entry in entries.items:
            h = entry.header
            ev = entry.event
            if h.seqId:
                # seqId numbers the entries of a partition one by one: a jump means entries lost
                # upstream (heartbeat/checkpoint entries carry 0 and are not numbered)
                if self.last_seq and h.seqId > self.last_seq + 1:
                    self.sink.count(first, Stat.SEQ_GAPS)
                    self.sink.count(first, Stat.SEQ_MISSING, h.seqId - self.last_seq - 1)
                self.last_seq = max(self.last_seq, h.seqId)
            kind = _entry_kind(h, ev)
            if kind == "begin":
                out.append(("begin", ev.beginEvent.transactionId or h.gtid or None))
            elif kind == "commit":
                out.append(("commit", ev.commitEvent.transactionId or h.gtid or None))
            elif kind == "dml":
                out.extend(("event", e) for e in self._dml(first, h, ev.dmlEvent))
            elif kind == "ddl":
                out.append(("event", self._ddl(first, h, ev.ddlEvent)))
            else:
                out.append(("control", kind))
        return out

    def _dml(self, rec: RawRecord, h: pb.Header, dml: pb.DMLEvent) -> list[Event]:
        c = _DmlCommon(self.ctx, rec, h, dml)
        out = []
        for row_i, row in enumerate(dml.rows):
            before, after, types = c.images(row)
            out.append(
                Event(
                    db=c.db,
                    tbl=c.tbl,
                    op=c.op,
                    pk=c.pk,
                    before=before,
                    after=after,
                    types=types,
                    order_key=c.head + u32(row_i) + c.tail,  # = binlog_key after the seqId
                    gtid=c.gtid,
                    binlog_file=c.file,
                    binlog_pos=c.pos,
                    seq=c.seq,
                    event_index=row_i,
                    event_time_ms=c.time_ms,
                    topic=rec.topic,
                    partition=rec.partition,
                    offset=rec.offset,
                )
            )
        return out

    def _ddl(self, rec: RawRecord, h: pb.Header, ddl: pb.DDLEvent) -> Event:
        db = ddl.schemaName or h.schemaName
        tbl = h.tableName
        target = ddl_target(ddl.sql)
        if target is not None:
            db, tbl = target.db or db, target.table
        if not tbl:
            parts = ddl.sql.split()
            if len(parts) >= 3 and parts[1].lower() == "table":
                sdb, tbl = split_qualified(parts[2])
                db = sdb or db
        return Event(
            db=db,
            tbl=tbl,
            op="ddl",
            ddl=ddl.sql,
            order_key=u64(h.seqId)
            + binlog_key(h.fileName, h.position, 0, rec.partition, rec.offset),
            gtid=h.gtid or None,
            binlog_file=h.fileName or None,
            binlog_pos=i64(h.position, "header position"),
            seq=str(h.seqId),
            event_time_ms=h.timestamp * 1000,
            topic=rec.topic,
            partition=rec.partition,
            offset=rec.offset,
        )

    def finish(self) -> list[RawRecord]:
        carry = self.txn.finish()
        if self.segments:
            self.sink.count(self.segments[0], Stat.SEGMENTS_CARRIED, len(self.segments))
            for r in self.segments:
                r.skip = 0
            carry.extend(self.segments)
        return carry


class TencentLane(Lane):
    """The Tencent decoder's fast lane (`recon.decode.lane`): an Envelope of one segment whose
    Entries are one whole transaction of row changes (BEGIN, DML entries, COMMIT: most messages
    of a transactional producer), while the decoder holds no segment and no open transaction,
    its entries numbered on from the last without a gap. Everything else goes to the decoder:
    segments, DDL, control entries, transactions across messages, gaps, damage."""

    dec: TencentDtsPbDecoder

    def __init__(self, dec: StreamDecoder, rows: LaneRows) -> None:
        super().__init__(dec, rows)
        self.sink = rows.sink()
        self.specs: dict[tuple[bytes, str, str], _NativeSpec | None] = {}
        """What the C read (`_tencent_lane.c`) needs of a DML entry's column list, per
        (its bytes, database, table): `native_spec`."""

    def idle(self) -> bool:
        return not (self.dec.segments or self.dec.txn.open)

    def take(self, rec: RawRecord) -> int | None:
        got = self.attempt(rec)
        if got is None:
            return None
        dec = self.dec
        last_seq, changes = got
        dec.last_seq = last_seq
        dec.txn.applied_whole([rec])
        for change in changes:
            self.emit(*change)
        self.count(rec, Stat.TRANSACTIONS_COMMITTED)
        return 1

    def run(
        self, cols: Sequence[Sequence[Any]], start: int, end: int, budget: int
    ) -> tuple[int, int]:
        """`Lane.run` by C (`_tencent_lane.run`: `take` of each record whose `read` C answers,
        its changes all of shapes counted before)."""
        if _native is None or not self.idle():
            return start, 0
        dec = self.dec
        topic, partition = cols[0][start], cols[1][start]
        stop, last_seq = _native.run(
            native_column(cols[4]), cols[2], start, end, budget, dec.last_seq, self.native_spec,
            topic, partition, self.sink,
        )  # fmt: skip
        if stop > start:  # the state `take` of the records leaves
            dec.last_seq = last_seq
            dec.txn.applied_whole([record_at(cols, stop - 1)])
            self.count_in((topic, partition), Stat.TRANSACTIONS_COMMITTED, stop - start)
        return stop, stop - start

    def read(self, rec: RawRecord) -> tuple[int, list[tuple[Any, ...]]] | None:
        """(the last seqId, the row changes (op, row, before, after)) of a record the lane
        takes, as C reads it (`_tencent_lane.read`: the decoder's answer, ~3.5x faster on the
        benchmark's messages); None for any other, which the decoder then reads."""
        if _native is None:
            return None
        return _native.read(
            rec.value, self.dec.last_seq, self.native_spec, rec.topic, rec.partition, rec.offset
        )

    def native_spec(self, columns: bytes, db: str, tbl: str) -> _NativeSpec | None:
        """A DML entry's column list (`columns`: its `columns` fields as written) as the C
        read takes it: the names, a code per column's logical type (`_LOGICAL_CODE`), the
        key and the types, the objects `_DmlCommon` gives its rows; None (the C read leaves the
        entry to Python) when two columns share a name. Cached per lane."""
        key = (columns, db, tbl)
        if key in self.specs:
            return self.specs[key]
        spec = _columns(tuple(_DmlColumns.FromString(columns).columns))
        pk = spec.pk or list(self.dec.ctx.primary_keys.get(f"{db}.{tbl}", []))
        codes = bytes(_LOGICAL_CODE.get(t, 0) for t in spec.logical)
        got = None
        if len(set(spec.names)) == len(spec.names):
            got = (tuple(spec.names), codes, pk, spec.types)
        if len(self.specs) >= 1024:
            self.specs.clear()
        self.specs[key] = got
        return got


TencentDtsPbDecoder.lane = TencentLane

_NativeSpec = tuple[tuple[str, ...], bytes, list[str], dict[str, str]]
_LOGICAL_CODE = {"datetime": 1, "timestamp": 2, **dict.fromkeys(_TEXT_LOGICAL, 3), "unknown": 4}
"""A column's logical type as the C read codes it (0: any other)."""
