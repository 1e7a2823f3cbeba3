"""Canal, protobuf mode (`canal.mq.flatMessage=false`) (docs/formats.md).

Kafka value = Packet{type=MESSAGES, body=Messages{messages: [Entry bytes...]}}. Absent fields take
the proto2 defaults (Entry.entryType ROWDATA, eventType UPDATE): our .proto declares them, so the
generated classes apply them. TRANSACTIONBEGIN/END bound transactions when present.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError as PbDecodeError

from recon._proto import canal_entry_pb2 as ce
from recon._proto import canal_packet_pb2 as cp
from recon.core.model import Event, Op, RawRecord
from recon.core.order import binlog_key
from recon.decode.base import DecodeContext, Sink, StreamDecoder, TxnAssembler
from recon.decode.formats.canal_common import canal_logical_type, canal_value
from recon.decode.stats import Stat, non_dml
from recon.errors import DecodeError

_DML: dict[int, Op] = {ce.INSERT: "insert", ce.UPDATE: "update", ce.DELETE: "delete"}


class CanalPbDecoder(StreamDecoder):
    format_name = "canal_pb"

    def __init__(self, ctx: DecodeContext, sink: Sink) -> None:
        super().__init__(ctx, sink)
        self.txn = TxnAssembler(sink)

    def feed(self, rec: RawRecord) -> None:
        if rec.value is None:
            self.sink.bad(rec, "empty value: a Canal record needs a Packet")
            return
        try:
            items = self._items(rec)
        except (PbDecodeError, DecodeError, UnicodeDecodeError) as err:
            self.sink.bad(rec, f"not a Canal protobuf Packet: {err}")
            return
        if not items:
            self.sink.count(rec, Stat.EMPTY_PACKETS)  # a MESSAGES packet with no entries
        self.txn.run_items([rec], items)

    def _items(self, rec: RawRecord) -> list[tuple[str, Any]]:
        packet = cp.Packet()
        packet.ParseFromString(rec.value or b"")
        if packet.type != cp.MESSAGES:
            raise DecodeError(f"packet type {packet.type} is not MESSAGES (7)")
        if packet.compression not in (cp.NONE, cp.COMPRESSIONCOMPATIBLEPROTO2):
            raise DecodeError(
                f"compressed packet ({cp.Compression.Name(packet.compression)}) not supported"
            )
        msgs = cp.Messages()
        msgs.ParseFromString(packet.body)
        out: list[tuple[str, Any]] = []
        for raw_entry in msgs.messages:
            entry = ce.Entry()
            entry.ParseFromString(raw_entry)
            out.extend(self._entry(rec, entry))
        return out

    def _entry(self, rec: RawRecord, entry: ce.Entry) -> list[tuple[str, Any]]:
        et = entry.entryType
        h = entry.header
        if et == ce.TRANSACTIONBEGIN:
            return [("begin", None)]
        if et == ce.TRANSACTIONEND:
            end = ce.TransactionEnd()
            end.ParseFromString(entry.storeValue)
            return [("commit", end.transactionId or None)]
        if et == ce.HEARTBEAT:
            return [("control", Stat.HEARTBEATS)]
        if et == ce.GTIDLOG:
            return [("control", Stat.GTID_ENTRIES)]
        if et != ce.ROWDATA:
            raise DecodeError(f"unknown entryType {et}")
        rc = ce.RowChange()
        rc.ParseFromString(entry.storeValue)
        return self._row_change(rec, h, rc)

    def _row_change(self, rec: RawRecord, h: ce.Header, rc: ce.RowChange) -> list[tuple[str, Any]]:
        props = {p.key: p.value for p in h.props}
        common: dict[str, Any] = dict(
            gtid=props.get("curtGtid") or h.gtid or None,
            binlog_file=h.logfileName or None,
            binlog_pos=h.logfileOffset,
            event_time_ms=h.executeTime or None,
            topic=rec.topic,
            partition=rec.partition,
            offset=rec.offset,
        )
        event_type = rc.eventType if rc.HasField("eventType") else h.eventType
        if rc.isDdl:
            key = binlog_key(h.logfileName, h.logfileOffset, 0, rec.partition, rec.offset)
            db = rc.ddlSchemaName or h.schemaName
            ev = Event(db=db, tbl=h.tableName, op="ddl", ddl=rc.sql, order_key=key, **common)
            return [("event", ev)]
        if event_type == ce.MHEARTBEAT:
            return [("control", Stat.HEARTBEATS)]
        op = _DML.get(event_type)
        if op is None:
            return [("control", non_dml(ce.EventType.Name(event_type)))]
        config_pk = list(self.ctx.primary_keys.get(f"{h.schemaName}.{h.tableName}", []))
        out: list[tuple[str, Any]] = []
        for row_i, rd in enumerate(rc.rowDatas):
            types: dict[str, str] = {}
            pk: list[str] = []
            before = _image(list(rd.beforeColumns), types, pk) if op != "insert" else None
            after = _image(list(rd.afterColumns), types, pk) if op != "delete" else None
            ev = Event(
                db=h.schemaName,
                tbl=h.tableName,
                op=op,
                pk=pk or config_pk,
                before=before,
                after=after,
                types=types,
                order_key=binlog_key(
                    h.logfileName, h.logfileOffset, row_i, rec.partition, rec.offset
                ),
                event_index=row_i,
                **common,
            )
            out.append(("event", ev))
        return out

    def finish(self) -> list[RawRecord]:
        return self.txn.finish()


def _image(cols: list[ce.Column], types: dict[str, str], pk: list[str]) -> dict[str, str | None]:
    """One row image; fills in the columns' types and the key columns it flags."""
    img: dict[str, str | None] = {}
    for c in cols:
        lt = canal_logical_type(c.mysqlType, c.sqlType if c.HasField("sqlType") else None)
        types[c.name] = lt
        if c.isKey and c.name not in pk:
            pk.append(c.name)
        img[c.name] = None if c.isNull else canal_value(c.value, lt)
    return img
