"""Debezium / dtle JSON (docs/formats.md; section 4), with or without the schema envelope.

op r = snapshot; c = insert (snapshot when `source.snapshot` says so - dtle sends its full copy as
`c` with `snapshot: true`); u = update (dtle's PK-changing `u` keeps old key in `before`); d =
delete. Tombstones (a Kafka null value, or dtle's `{"schema":null,"payload":null}`) are counted
and dropped. dtle's schema-change topic and Debezium's schema-change events become DDL events.
Values are converted with the schema's semantic types where the message carries a schema.
"""

from __future__ import annotations

from binascii import a2b_base64
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from recon.core.ddl import ddl_target
from recon.core.model import Event, Op, RawRecord, i64
from recon.core.order import binlog_key, gtid_number, kafka_tail, u32, u64
from recon.core.values import (
    INTEGER_LOGICAL,
    date_from_days,
    datetime_from_epoch_ms,
    datetime_from_epoch_us,
    decimal_from_twos_complement,
    mysql_logical_type,
    number_text,
    parse_timestamp_text,
    time_from_us,
)
from recon.decode.base import JsonStreamDecoder, PerObject, SharedMemberJson, text_or_none
from recon.decode.formats.native import native_module
from recon.decode.lane import Image as LaneImage
from recon.decode.lane import Lane, LaneRows, opening_specs
from recon.decode.stats import Stat
from recon.decode.stream import native_column
from recon.errors import DecodeError

_native = native_module("_debezium_lane")

_SNAPSHOT_TRUE = {
    "true",
    "first",
    "first_in_data_collection",
    "last_in_data_collection",
    "last",
    "incremental",
}

_PRIMITIVE = {
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float": "float32",
    "float32": "float32",
    "double": "float64",
    "float64": "float64",
    "boolean": "bool",
    "string": "string",
    "bytes": "binary",
}
_SEMANTIC = {
    "io.debezium.time.Date": "date",
    "io.debezium.time.Timestamp": "datetime",
    "io.debezium.time.MicroTimestamp": "datetime",
    "io.debezium.time.NanoTimestamp": "datetime",
    "io.debezium.time.ZonedTimestamp": "timestamp",
    "io.debezium.time.Time": "time",
    "io.debezium.time.MicroTime": "time",
    "io.debezium.time.NanoTime": "time",
    "io.debezium.time.Year": "year",
    "io.debezium.data.Json": "json",
    "io.debezium.data.Enum": "enum",
    "io.debezium.data.EnumSet": "set",
    "io.debezium.data.Bits": "binary",
    "io.debezium.data.geometry.Point": "binary",
    "io.debezium.data.geometry.Geometry": "binary",
    "io.debezium.data.VariableScaleDecimal": "decimal(65,30)",
}


def _field_type(f: dict) -> tuple[str, dict]:
    name = f.get("name") or ""
    params = f.get("parameters") or {}
    source_type = params.get("__debezium.source.column.type")
    if isinstance(source_type, str):
        # column.propagate.source.type: the column's own type settles what the wire type cannot
        # (a precise BIGINT UNSIGNED travels as Decimal(20,0), like a DECIMAL(20,0) column)
        lt = mysql_logical_type(source_type)
        if lt in INTEGER_LOGICAL:
            return lt, f
    if name == "org.apache.kafka.connect.data.Decimal":
        scale = int(params.get("scale", 0))
        prec = int(params.get("connect.decimal.precision", 65))
        return f"decimal({prec},{scale})", f
    if name in _SEMANTIC:
        return _SEMANTIC[name], f
    return _PRIMITIVE.get(str(f.get("type")), "unknown"), f


# Debezium's temporal semantic types, from their integer encodings (formats.md 4)
_TEMPORAL: dict[str, Callable[[int], str]] = {
    "io.debezium.time.Date": date_from_days,
    "io.debezium.time.Timestamp": datetime_from_epoch_ms,
    "io.debezium.time.MicroTimestamp": datetime_from_epoch_us,
    "io.debezium.time.NanoTimestamp": lambda n: datetime_from_epoch_us(n // 1000),
    "io.debezium.time.Time": lambda n: time_from_us(n * 1000),
    "io.debezium.time.MicroTime": time_from_us,
    "io.debezium.time.NanoTime": lambda n: time_from_us(n // 1000),
}


def _convert(v: object, logical: str, f: dict | None) -> str | None:
    if v is None:
        return None
    name = (f or {}).get("name") or ""
    if name == "org.apache.kafka.connect.data.Decimal" and isinstance(v, str):
        scale = int(((f or {}).get("parameters") or {}).get("scale", 0))
        return decimal_from_twos_complement(a2b_base64(v), scale)
    if name == "io.debezium.data.VariableScaleDecimal" and isinstance(v, dict):
        return decimal_from_twos_complement(a2b_base64(v["value"]), int(v["scale"]))
    if name in (
        "io.debezium.data.geometry.Point",
        "io.debezium.data.geometry.Geometry",
    ) and isinstance(v, dict):
        return str(v.get("wkb")) if v.get("wkb") is not None else None
    if logical == "uint64" and isinstance(v, int) and not isinstance(v, bool) and v < 0:
        # bigint.unsigned.handling.mode=long (Debezium's default) wraps values from 2^63 on
        return str(v + (1 << 64))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        temporal = _TEMPORAL.get(name)
        return temporal(int(v)) if temporal else number_text(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict) and "wkb" in v:
        # a Debezium geometry struct {wkb, srid[, x, y]} sent without its schema
        return str(v["wkb"]) if v["wkb"] is not None else None
    if isinstance(v, str):
        if logical == "timestamp":
            return parse_timestamp_text(v) or v
        return v
    # structs / arrays with no known semantic type: keep them as compact JSON text
    return orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()


def _infer(v: object) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        if -(1 << 63) <= v < (1 << 63):
            return "int64"
        return "uint64" if 0 <= v < (1 << 64) else "decimal(38,0)"  # BIGINT UNSIGNED as a number
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict) and "wkb" in v:
        return "binary"
    return "json" if v is not None else "unknown"


class DebeziumJsonDecoder(JsonStreamDecoder):
    format_name = "debezium_json"
    label = "Debezium message"

    def feed(self, rec: RawRecord) -> None:
        # a tombstone is a Kafka null value (or JSON null); an empty value is damage. Only a
        # value opening with `n` or a space can be `null` (the check copied every value)
        value = rec.value
        if value is not None and value[:1] in _NULL_OPENINGS and value.strip() == b"null":
            self.sink.count(rec, Stat.TOMBSTONES)
            return
        super().feed(rec)

    def empty_value(self, rec: RawRecord) -> bool:
        if rec.value is None:
            self.sink.count(rec, Stat.TOMBSTONES)
            return True
        return False

    def accepts(self, msg: Any) -> str | None:
        return None if isinstance(msg, dict) else "the value is not a JSON object"

    def parse(self, value: bytes) -> Any:
        return _PARSE(value)

    def handle(self, rec: RawRecord, msg: dict[str, Any]) -> None:
        schema = None
        if "payload" in msg and "schema" in msg and len(msg) <= 2:
            schema, payload = msg["schema"], msg["payload"]
            if payload is None:
                self.sink.count(rec, Stat.TOMBSTONES)  # dtle's tombstone (formats.md 4.2)
                return
        else:
            payload = msg
        if not isinstance(payload, dict):
            raise DecodeError("payload is not an object")
        if "op" not in payload:
            if "ddl" in payload:
                self._ddl(rec, payload)
                return
            if payload.get("status") in ("BEGIN", "END"):
                self.sink.count(rec, Stat.TRANSACTION_MARKERS)
                return
            raise DecodeError("no `op` field: not a change event")
        op_code = payload["op"]
        source = payload.get("source") or {}
        db = text_or_none(source.get("db"), "source.db")
        tbl = text_or_none(source.get("table"), "source.table")
        if not db or not tbl:
            db, tbl = self._from_topic(rec.topic, db, tbl)
        if op_code == "t":
            truncate = Event(db=db, tbl=tbl, op="ddl", ddl=f"TRUNCATE TABLE `{db}`.`{tbl}`")
            self._emit(rec, truncate, source, payload)
            return
        op = _op(op_code, source.get("snapshot"))
        before, after, types, defaults = _images(schema, payload)
        if op in ("insert", "snapshot") and after is None:
            raise DecodeError(f"op {op_code!r} without `after`")
        if op == "delete" and before is None:
            raise DecodeError("op 'd' without `before`")
        if op == "update" and after is None:
            raise DecodeError("op 'u' without `after`")
        ev = Event(
            db=db,
            tbl=tbl,
            op=op,
            pk=self._key_columns(rec, db, tbl),
            before=before,
            after=after,
            types=types,
            defaults=defaults or None,
        )
        self._emit(rec, ev, source, payload)

    def _emit(self, rec: RawRecord, ev: Event, source: dict, payload: dict) -> None:
        """Fill in the source position and the raw record coordinates, then emit."""
        (
            ev.order_key, ev.gtid, ev.binlog_file, ev.binlog_pos, ev.event_index, ev.txn_id,
            ev.event_time_ms,
        ) = _position(rec, source, payload.get("transaction"))  # fmt: skip
        ev.topic, ev.partition, ev.offset = rec.topic, rec.partition, rec.offset
        self.sink.events.append(ev)

    def _ddl(self, rec: RawRecord, payload: dict) -> None:
        position = payload.get("position") or payload.get("source") or {}
        db = text_or_none(payload.get("databaseName") or payload.get("schemaName"), "databaseName")
        db = db or ""
        ev = Event(db=db, tbl="", op="ddl", ddl=str(payload.get("ddl") or ""))
        src = {
            "file": position.get("file"),
            "pos": position.get("pos"),
            "gtid": None,
            "ts_sec": position.get("ts_sec"),
            "ts_ms": position.get("ts_ms"),  # Debezium's `source`; dtle's position has ts_sec
        }
        target = ddl_target(ev.ddl or "")
        if target is not None:
            ev.db, ev.tbl = target.db or db, target.table
        self._emit(rec, ev, src, payload)

    def _from_topic(self, topic: str, db: str | None, tbl: str | None) -> tuple[str, str]:
        """A message that names no table takes it from `<prefix>.<db>.<table>` (contract 2.3)."""
        parts = topic.split(".")
        if len(parts) >= 3:
            return db or parts[-2], tbl or parts[-1]
        raise DecodeError(
            f"the message names no table and topic {topic!r} is not <prefix>.<db>.<table>"
        )

    def _key_columns(self, rec: RawRecord, db: str, tbl: str) -> list[str]:
        configured = self.ctx.primary_keys.get(f"{db}.{tbl}")
        if configured:
            return _shared_key(configured)
        if not rec.key:
            return _shared_key(())
        try:
            key = orjson.loads(rec.key)
        except orjson.JSONDecodeError:
            return _shared_key(())
        if isinstance(key, dict) and "payload" in key and "schema" in key:
            key = key["payload"]
        return _shared_key(key if isinstance(key, dict) else ())


def _position(rec: RawRecord, source: dict, transaction: Any) -> tuple[Any, ...]:
    """An event's (order key, gtid, binlog file, binlog position, row, transaction id, source
    time) from its message's `source` and its payload's `transaction`."""
    file, pos = source.get("file") or None, source.get("pos")
    row = int(source.get("row") or 0)
    gtid = text_or_none(source.get("gtid") or None, "source.gtid")
    if file:
        ok = binlog_key(file, int(pos or 0), row, rec.partition, rec.offset)
    else:
        ok = u64(0) + u64(gtid_number(gtid)) + u32(row) + kafka_tail(rec.partition, rec.offset)
    ts = source.get("ts_ms")
    if ts is None and source.get("ts_sec") is not None:
        ts = int(source["ts_sec"]) * 1000
    tx = transaction or {}
    return (
        ok,
        gtid,
        file,
        i64(int(pos), "source.pos") if pos is not None else None,
        i64(row, "source.row"),
        text_or_none(tx.get("id"), "transaction.id") if isinstance(tx, dict) else None,
        i64(int(ts), "source.ts_ms") if ts else None,
    )


def _shared_key(columns: Iterable[str]) -> list[str]:
    """One list per distinct key (read-only for callers): a table's events share it, so their
    Arrow column and their shape are built once per batch, not per event."""
    return _key_list(tuple(columns))


@lru_cache(maxsize=1024)
def _key_list(columns: tuple[str, ...]) -> list[str]:
    return list(columns)


_PARSE = SharedMemberJson("schema")
"""The envelope's schema is most of a message's bytes, the same text in every message of a
table: read once per distinct text."""

_NULL_OPENINGS = b"n \t\n\r\x0b\x0c"
"""The first byte of a value that is JSON `null` with ASCII whitespace around it (or of an empty
value, which `in` finds in any bytes)."""

_DML: dict[str, Op] = {"c": "insert", "u": "update", "d": "delete"}


def _op(op_code: object, snap: object) -> Op:
    """The canonical op of a Debezium `op` (a snapshot read, or a create during a snapshot)."""
    is_snapshot = snap is True or (isinstance(snap, str) and snap.lower() in _SNAPSHOT_TRUE)
    if op_code == "r" or (op_code == "c" and is_snapshot):
        return "snapshot"
    if op_code in ("c", "u", "d"):
        return _DML[str(op_code)]
    raise DecodeError(f"unknown op {op_code!r}")


Image = dict[str, str | None]


Converter = Callable[[object], "str | None"]
_Fields = dict[str, dict[str, tuple[str, dict, Converter]]]


def _converter(logical: str, f: dict) -> tuple[Converter, bool]:
    """`_convert` for one schema field, with the checks that depend only on the field made
    once: the common values (a string, an int) take a short path, the rest go through
    `_convert` itself. Also whether the field keeps a string value as it is."""
    name = f.get("name") or ""
    slow: Converter = lambda v: _convert(v, logical, f)  # noqa: E731
    if name == "org.apache.kafka.connect.data.Decimal":
        scale = int((f.get("parameters") or {}).get("scale", 0))
        return (
            lambda v: (
                decimal_from_twos_complement(a2b_base64(v), scale) if type(v) is str else slow(v)
            ),
            False,
        )
    temporal = _TEMPORAL.get(name)
    if temporal is not None:
        return lambda v: temporal(v) if type(v) is int else slow(v), False
    if name in _SEMANTIC or logical in ("uint64", "timestamp"):
        return slow, False
    return lambda v: v if type(v) is str else str(v) if type(v) is int else slow(v), True


@dataclass(frozen=True, slots=True)
class _Part:
    """The fields of one image (`before` or `after`) of a schema, as the per-message path
    reads them."""

    types: dict[str, str]
    """column -> logical type"""
    convs: dict[str, Converter]
    plain: frozenset[str]
    """Columns whose string values are kept as they are (no call per value)."""
    defaults: bool
    """Whether a field states a `default`."""


_FIELDS_CACHE: dict[bytes, tuple[_Fields, dict[str, _Part]]] = {}
_NO_FIELD: tuple[None, None, None] = (None, None, None)


def _fields_of(schema: dict[str, Any]) -> tuple[_Fields, dict[str, _Part]]:
    return _fields_of_text(orjson.dumps(schema), schema)


_FIELDS_OF = PerObject(_fields_of)
"""A shared schema object's fields (`SharedMemberJson`): read without writing the schema out
as text again."""


def _schema_fields(schema: object) -> tuple[_Fields, dict[str, _Part]]:
    """The before/after fields of a message schema: column -> (logical type, field, converter),
    and the same per image as a `_Part`. Every message of a table repeats its schema: read
    once per distinct schema text (the cache is read-only for callers and bounded)."""
    if not isinstance(schema, dict):
        return {}, {}
    return _FIELDS_OF(schema)


def _fields_of_text(text: bytes, schema: dict[str, Any]) -> tuple[_Fields, dict[str, _Part]]:
    """`_schema_fields` of a schema, cached by its text."""
    cached = _FIELDS_CACHE.get(text)
    if cached is None:
        fields: _Fields = {}
        parts: dict[str, _Part] = {}
        for part in schema.get("fields") or []:
            if part.get("field") in ("before", "after"):
                cols = fields[part["field"]] = {}
                keeps: dict[str, bool] = {}  # a field named twice: the last one, as in `cols`
                for f in part.get("fields") or []:
                    lt = _field_type(f)[0]
                    conv, keeps[f["field"]] = _converter(lt, f)
                    cols[f["field"]] = (lt, f, conv)
                parts[part["field"]] = _Part(
                    types={c: lt for c, (lt, _, _) in cols.items()},
                    convs={c: conv for c, (_, _, conv) in cols.items()},
                    plain=frozenset(c for c, k in keeps.items() if k),
                    defaults=any(f.get("default") is not None for _, f, _ in cols.values()),
                )
        if len(_FIELDS_CACHE) >= 1024:
            _FIELDS_CACHE.clear()
        cached = _FIELDS_CACHE[text] = (fields, parts)
    return cached


def _images(
    schema: object, payload: dict[str, Any]
) -> tuple[Image | None, Image | None, dict[str, str], dict[str, str]]:
    """(before, after, types, defaults): values typed by the message schema's fields when it has
    one, else inferred from the JSON values (the first image's type of a column wins); defaults:
    the schema's `default` of each column that states one (what rows that predate the column
    read; the JSON converter writes it in the value's own encoding)."""
    fields, parts = _schema_fields(schema)
    types: dict[str, str] = {}
    before = _image(payload, "before", fields, parts, types)
    after = _image(payload, "after", fields, parts, types)
    which = "after" if fields.get("after") else "before"  # the image whose defaults count
    part = parts.get(which)
    if part is not None and types == part.types:
        # the schema's own (read-only) object, shared by the table's events: their Arrow
        # column and their shape are then built once per batch, not per event
        types = part.types
    if part is not None and not part.defaults:
        return before, after, types, {}
    return before, after, types, _defaults(fields.get(which), types)


def _image(
    payload: dict[str, Any],
    which: str,
    fields: _Fields,
    parts: dict[str, _Part],
    types: dict[str, str],
) -> Image | None:
    """One image's values as text; its columns' types added to `types` (where not known)."""
    img = payload.get(which)
    if img is None:
        return None
    if not isinstance(img, dict):
        raise DecodeError(f"`{which}` is not an object")
    part = parts.get(which)
    if part is not None and part.types.keys() >= img.keys():
        # every column has its field (the common case): no lookup of a missing field, and a
        # string of a plain column is kept without a call
        ptypes = part.types
        if not types:
            for c in img:
                types[c] = ptypes[c]
        else:
            for c in img:
                if types.get(c) in (None, "unknown"):
                    types[c] = ptypes[c]
        convs, plain = part.convs, part.plain
        return {c: v if type(v) is str and c in plain else convs[c](v) for c, v in img.items()}
    fmeta = fields.get(which, {})
    out: Image = {}
    for c, v in img.items():
        lt, f, conv = fmeta.get(c, _NO_FIELD)
        if lt is None:
            lt = types.get(c) or _infer(v)
            conv = None
        if types.get(c) in (None, "unknown"):
            types[c] = lt
        out[c] = _convert(v, lt, f) if conv is None else conv(v)
    return out


def _defaults(
    fields: dict[str, tuple[str, dict, Converter]] | None, types: dict[str, str]
) -> dict[str, str]:
    defaults: dict[str, str] = {}
    for c, (lt, f, _) in (fields or {}).items():
        if f.get("default") is None:
            continue
        logical = types.get(c) or lt
        try:
            value = _convert(f["default"], logical, f)
        except (ValueError, TypeError, KeyError):
            continue  # a default we cannot read is not a reason to lose the change
        if value is not None and not (logical in _TEMPORAL_LOGICAL and _epoch_zero(value)):
            defaults[c] = value
    return defaults


# The connector writes epoch zero as the default of a temporal column whose DEFAULT is
# CURRENT_TIMESTAMP / NOW() (and of a NOT NULL zero date): not the value earlier rows read.
_TEMPORAL_LOGICAL = frozenset({"date", "datetime", "timestamp"})


def _epoch_zero(value: str) -> bool:
    return value.startswith("1970-01-01") and not any(ch in "123456789" for ch in value[10:])


class DebeziumLane(Lane):
    """The Debezium decoder's fast lane (`recon.decode.lane`): a create, read, update or
    delete in the JSON converter's envelope (`schema` and `payload`) whose `source` names its
    table, whose schema's before and after hold the same columns, and whose images hold
    every one of them (a MySQL connector's full row image). Everything else goes to the
    decoder: tombstones, DDL, transaction markers, truncates, damage, messages without a
    schema or with partial images."""

    dec: DebeziumJsonDecoder

    def __init__(self, dec: DebeziumJsonDecoder, rows: LaneRows) -> None:
        super().__init__(dec, rows)
        self.parse = dec.parse
        self.primary_keys = dec.ctx.primary_keys
        """The configured keys (`_key_columns`), for the C read."""
        self.sink = rows.sink()
        self.schema: Any = None
        self.table: _LaneSchema | None = None
        """What the lane knows of `schema` (the last message's)."""

    def take(self, rec: RawRecord) -> int | None:
        got = self.attempt(rec)
        if got is None:
            return None
        self.emit(*got)
        return 1

    def run(
        self, cols: Sequence[Sequence[Any]], start: int, end: int, budget: int
    ) -> tuple[int, int]:
        """`Lane.run` by C (`_debezium_lane.run`: `take` of each record whose `read` C
        answers; a tombstone, a Kafka null value, counted as the decoder counts it)."""
        if _native is None:
            return start, 0
        recent = opening_specs(_PARSE.recent, _native_spec_of)
        topic, partition = cols[0][start], cols[1][start]
        stop, consumed, tombstones = _native.run(
            native_column(cols[4]), cols[3], cols[2], start, end, budget, recent,
            self.primary_keys, _shared_key, topic, partition, self.sink,
        )  # fmt: skip
        if tombstones:  # what the decoder does with one (`empty_value`)
            self.count_in((topic, partition), Stat.TOMBSTONES, tombstones)
        return stop, consumed

    def read(
        self, rec: RawRecord
    ) -> tuple[Op, tuple[Any, ...], LaneImage | None, LaneImage | None] | None:
        """The record's (op, row, before, after) as C reads it (`_debezium_lane.read`: a
        message whose schema text the decoder's parse has seen, its row built as the decoder
        builds its event); None for any other, which the decoder then reads."""
        value = rec.value
        if not value or value[:1] in _NULL_OPENINGS:
            return None
        known = _PARSE.known_opening(value)
        if known is None or type(known[0]) is not dict or _native is None:
            return None
        table = self.table_of(known[0])
        if table.native is None:
            return None
        return _native.read(
            value, known[1], table.native, rec.key, self.primary_keys,
            _shared_key, rec.topic, rec.partition, rec.offset,
        )  # fmt: skip

    def table_of(self, schema: dict[str, Any]) -> _LaneSchema:
        if schema is not self.schema:  # most messages share their table's schema object
            self.table = _LANE_SCHEMA(schema)
            self.schema = schema
        assert self.table is not None
        return self.table


DebeziumJsonDecoder.lane = DebeziumLane
_LANE_OPS = frozenset(("c", "u", "d", "r"))


class _LaneSchema:
    """What the lane reads from a message's `schema`: the column types and defaults the decoder
    gives an event whose images hold every column (`_images`), when the schema's before and
    after hold the same columns (`types` None otherwise: the lane leaves its messages to the
    decoder). Read once per object (`_LANE_SCHEMA`: a partition's messages may take turns
    between tables), so a table's events share one defaults object, counted as one shape."""

    def __init__(self, schema: dict[str, Any]) -> None:
        fields, self.parts = _schema_fields(schema)
        before, after = self.parts.get("before"), self.parts.get("after")
        self.types: dict[str, str] | None = None
        self.defaults: dict[str, str] | None = None
        self.native: tuple[Any, ...] | None = None
        """What the C read needs (`_debezium_lane.c`'s spec): per part, its columns' names (as
        str and UTF-8), converters, and how C converts their values itself (`_native_kind`);
        then the types and defaults of the row it builds. None: C does not read this schema's
        messages."""
        if fields.get("after") and before is not None and after is not None:
            if before.types == after.types:
                self.types = after.types
                if after.defaults:
                    self.defaults = _defaults(fields["after"], after.types) or None
                native = _native_spec(fields, before, after)
                if native is not None:
                    self.native = (*native, self.types, self.defaults)


def _native_spec(fields: _Fields, before: _Part, after: _Part) -> tuple[Any, ...] | None:
    """`_LaneSchema.native` of a schema's two parts (None: a column name that is not UTF-8)."""
    spec = []
    for which, p in (("before", before), ("after", after)):
        kinds = [_native_kind(fields[which][c][1], c in p.plain) for c in p.types]
        try:
            utf8 = tuple(c.encode() for c in p.types)
        except UnicodeEncodeError:
            return None
        convs = tuple(p.convs[c] for c in p.types)
        spec.append(
            (tuple(p.types), utf8, convs, bytes(k for k, _ in kinds), tuple(s for _, s in kinds))
        )
    return tuple(spec)


_NATIVE_TEMPORAL = {
    "io.debezium.time.Timestamp": 3,
    "io.debezium.time.MicroTimestamp": 4,
    "io.debezium.time.Date": 5,
}


def _native_kind(f: dict[str, Any], plain: bool) -> tuple[int, int]:
    """(how C converts a column's values, a DECIMAL's scale), as `_converter` chose its
    converter: 0 plain (a string kept, an integer written out), 2 a DECIMAL of scale 1-100
    (its base64), 3-5 a Timestamp, MicroTimestamp or Date (its integer), 1 the converter for
    every value (C then calls it; it also does for what the kinds above do not cover)."""
    name = f.get("name") or ""
    if name == "org.apache.kafka.connect.data.Decimal":
        try:
            scale = int((f.get("parameters") or {}).get("scale", 0))
        except (TypeError, ValueError):
            return 1, 0
        return (2, scale) if 1 <= scale <= 100 else (1, 0)
    if name in _TEMPORAL:
        return _NATIVE_TEMPORAL.get(name, 1), 0
    return (0 if plain else 1), 0


_LANE_SCHEMA = PerObject(_LaneSchema)


def _native_spec_of(schema: Any) -> tuple[Any, ...] | None:
    """The C read's spec of the messages of `schema` (`DebeziumLane.read`'s)."""
    return _LANE_SCHEMA(schema).native if type(schema) is dict else None
