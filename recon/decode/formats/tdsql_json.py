"""TencentDB for MariaDB / TDSQL binlog subscription JSON, `logtype: mysqlbinlog` (docs/formats.md).

Rows are positional SQL literals (`where` = before, `field` = after) with no column names: names
and types come from DDL seen in the stream, the config's `ddl:`/`columns:`, or the schema state.
`gtid` events open a transaction, `xid` events commit it, `query` events carry DDL.
"""

from __future__ import annotations

from typing import Any

from recon.core.ddl import apply_ddl
from recon.core.model import Event, Op, RawRecord, i64
from recon.core.order import gtid_number, kafka_tail, u32, u64
from recon.core.sqlddl import TableDef, parse_sql_literal
from recon.core.values import mysql_logical_type, normalize_datetime_text, parse_timestamp_text
from recon.decode.base import DecodeContext, JsonStreamDecoder, Sink, TxnAssembler
from recon.decode.stats import Stat
from recon.errors import DecodeError

_HEARTBEAT_TABLE = ("sysdb", "statustableforhb")


def _index(v: object) -> int:
    """`event_index` is a string ("4"); compare it as an integer (formats.md 2.3)."""
    try:
        return int(str(v))
    except ValueError:
        return 0


_ROW_OPS: dict[str, Op] = {"insert": "insert", "update": "update", "delete": "delete"}


class TdsqlJsonDecoder(JsonStreamDecoder):
    format_name = "tdsql_json"
    label = "TDSQL binlog message"

    def __init__(self, ctx: DecodeContext, sink: Sink) -> None:
        super().__init__(ctx, sink)
        self.txn = TxnAssembler(sink)
        self.tables: dict[str, TableDef] = dict(ctx.tables)

    def accepts(self, msg: Any) -> str | None:
        if not isinstance(msg, dict) or msg.get("logtype") != "mysqlbinlog":
            return "logtype is not 'mysqlbinlog'"
        return None

    def handle(self, rec: RawRecord, msg: dict[str, Any]) -> None:
        kind = str(msg.get("eventtypestr") or "").lower()
        self.txn.start_group([rec])
        gtid = msg.get("gtid") or None
        if kind == "gtid":
            self.txn.begin(0, gtid)
            return
        if kind == "xid":
            self.txn.commit(str(msg.get("xid")) if msg.get("xid") is not None else gtid)
            return
        db, tbl = str(msg.get("db") or ""), str(msg.get("table") or "")
        index = _index(msg.get("event_index"))
        begintime = msg.get("begintime")
        time_ms = i64(begintime * 1000, "begintime") if isinstance(begintime, int) else None
        common: dict[str, Any] = dict(
            order_key=u64(gtid_number(gtid))
            + u32(index)
            + u32(0)
            + kafka_tail(rec.partition, rec.offset),
            gtid=gtid,
            event_index=i64(index, "event_index"),
            event_time_ms=time_ms,
            topic=rec.topic,
            partition=rec.partition,
            offset=rec.offset,
        )
        if kind == "query":
            self._query(rec, db, tbl, str(msg.get("sql") or ""), gtid, common)
            return
        op = _ROW_OPS.get(kind)
        if op is None:
            raise DecodeError(f"unknown eventtypestr {msg.get('eventtypestr')!r}")
        if (db.lower(), tbl.lower()) == _HEARTBEAT_TABLE:
            self.sink.count(rec, Stat.HEARTBEATS)
            return
        self.txn.event(self._row_event(op, db, tbl, msg, common))

    def _query(
        self, rec: RawRecord, db: str, tbl: str, sql: str, gtid: str | None, common: dict[str, Any]
    ) -> None:
        """A DDL: fold it into the table definitions; one that cannot be read is quarantined
        (with its text) and leaves its table's later rows quarantined, never decoded by guess."""
        ddl_db, ddl_tbl, error = apply_ddl(self.tables, db, sql)
        ev = Event(db=ddl_db or db, tbl=ddl_tbl or tbl, op="ddl", ddl=sql, **common)
        if error is None:
            self.txn.event(ev)
        # a DDL commits implicitly; its gtid event opened a "transaction"
        self.txn.commit(gtid)
        if error is not None:
            self.sink.count(rec, Stat.DDL_UNREADABLE)
            self.sink.bad(rec, f"unreadable DDL of {ev.db}.{ev.tbl}: {error}", ddl=ev)

    def _row_event(
        self, kind: Op, db: str, tbl: str, msg: dict[str, Any], common: dict[str, Any]
    ) -> Event:
        """A row change: its positional values named by the table definition in force."""
        key = f"{db}.{tbl}"
        tdef = self.tables.get(key)
        if tdef is not None and tdef.unreadable:
            raise DecodeError(
                f"the columns of {key} are unknown since a DDL that could not be read "
                f"({tdef.unreadable}); give `ddl:` for {key} in the pipeline config"
            )
        if tdef is None:
            raise DecodeError(
                f"no column names known for {key}: the stream has shown no CREATE TABLE for it; "
                f"give `columns:` or `ddl:` for {key} in the pipeline config"
            )
        types = {c: mysql_logical_type(tdef.types.get(c)) for c in tdef.columns}
        before = self._image(key, tdef, types, msg.get("where")) if kind != "insert" else None
        after = self._image(key, tdef, types, msg.get("field")) if kind != "delete" else None
        if kind == "update" and (before is None or after is None):
            raise DecodeError("update without both `where` and `field`")
        pk = tdef.primary_key or list(self.ctx.primary_keys.get(key, []))
        image = after or before or {}
        return Event(
            db=db,
            tbl=tbl,
            op=kind,
            pk=pk,
            before=before,
            after=after,
            types={c: t for c, t in types.items() if c in image},
            **common,
        )

    def _image(
        self, key: str, tdef: TableDef, types: dict[str, str], values: object
    ) -> dict[str, str | None] | None:
        if not isinstance(values, list) or not values:
            return None
        if len(values) != len(tdef.columns):
            raise DecodeError(
                f"{key}: {len(values)} values but {len(tdef.columns)} known columns "
                f"({', '.join(tdef.columns)}); fix `columns:`/`ddl:` for {key} in the config"
            )
        img: dict[str, str | None] = {}
        for col, raw in zip(tdef.columns, values, strict=True):
            text, _is_bin = parse_sql_literal(raw if raw is None else str(raw))
            lt = types[col]
            if text is not None and lt == "timestamp":
                text = parse_timestamp_text(text) or text
            elif text is not None and lt == "datetime":
                text = normalize_datetime_text(text)
            img[col] = text
        return img

    def finish(self) -> list[RawRecord]:
        return self.txn.finish()
