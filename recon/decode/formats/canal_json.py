"""Canal flat message JSON (`canal.mq.flatMessage=true`) (docs/formats.md).

`data` holds full rows (after image; the before image for DELETE); `old` holds, per row, only the
changed columns' previous values, so the UPDATE before image is `data` overlaid with `old`. Values
are strings; binary columns are ISO-8859-1 text. No transaction markers, no binlog position:
order is Kafka (partition, offset) then row.
"""

from __future__ import annotations

from typing import Any

from recon.core.model import Event, Op, RawRecord, i64
from recon.core.order import kafka_tail, u32
from recon.decode.base import JsonStreamDecoder, text_list, text_or_none
from recon.decode.formats.canal_common import canal_logical_type, canal_value
from recon.decode.stats import non_dml
from recon.errors import DecodeError

_OPS: dict[str, Op] = {
    "INSERT": "insert",
    "UPDATE": "update",
    "DELETE": "delete",
    "INIT": "snapshot",
}


class CanalJsonDecoder(JsonStreamDecoder):
    format_name = "canal_json"
    label = "Canal flat message"

    def accepts(self, msg: Any) -> str | None:
        if not isinstance(msg, dict) or "type" not in msg or "database" not in msg:
            return "no `type`/`database` fields"
        return None

    def handle(self, rec: RawRecord, msg: dict[str, Any]) -> None:
        db, tbl = str(msg.get("database") or ""), str(msg.get("table") or "")
        typ = str(msg.get("type") or "").upper()
        es = msg.get("es")
        common: dict[str, Any] = dict(
            gtid=text_or_none(msg.get("gtid") or None, "gtid"),
            event_time_ms=i64(es, "es") if type(es) is int else None,
            topic=rec.topic,
            partition=rec.partition,
            offset=rec.offset,
        )
        if msg.get("isDdl"):
            self.sink.events.append(
                Event(
                    db=db,
                    tbl=tbl,
                    op="ddl",
                    ddl=str(msg.get("sql") or ""),
                    order_key=kafka_tail(rec.partition, rec.offset) + u32(0),
                    **common,
                )
            )
            return
        data = msg.get("data")
        op = _OPS.get(typ)
        if data is None or op is None:
            # QUERY / XACOMMIT / heartbeat-like flat messages carry no rows (formats.md 3.5)
            self.sink.count(rec, non_dml(typ))
            return
        if not isinstance(data, list):
            raise DecodeError("`data` is not a list of rows")
        mysql_types = msg.get("mysqlType") or {}
        sql_types = msg.get("sqlType") or {}
        old = msg.get("old") or []
        pk = text_list(msg.get("pkNames"), "pkNames") or list(
            self.ctx.primary_keys.get(f"{db}.{tbl}", [])
        )
        events = []
        for row_i, row in enumerate(data):
            if not isinstance(row, dict):
                raise DecodeError(f"row {row_i} of `data` is not an object")
            prev = old[row_i] if row_i < len(old) and isinstance(old[row_i], dict) else {}
            types, before, after = _images(op, row, prev, mysql_types, sql_types)
            events.append(
                Event(
                    db=db,
                    tbl=tbl,
                    op=op,
                    pk=pk,
                    before=before,
                    after=after,
                    types=types,
                    order_key=kafka_tail(rec.partition, rec.offset) + u32(row_i),
                    event_index=row_i,
                    **common,
                )
            )
        self.sink.events.extend(events)


Image = dict[str, str | None]


def _images(
    op: Op,
    row: dict[str, Any],
    prev: dict[str, Any],
    mysql_types: dict[str, Any],
    sql_types: dict[str, Any],
) -> tuple[dict[str, str], Image | None, Image | None]:
    """(types, before, after) of one row: `old` holds an update's changed columns only."""
    types = {c: canal_logical_type(mysql_types.get(c), sql_types.get(c)) for c in row}
    image = {c: canal_value(None if v is None else str(v), types[c]) for c, v in row.items()}
    if op == "delete":
        return types, image, None
    if op != "update":
        return types, None, image
    before = dict(image)
    for c, v in prev.items():
        lt = types.get(c) or canal_logical_type(mysql_types.get(c), sql_types.get(c))
        types.setdefault(c, lt)
        before[c] = canal_value(None if v is None else str(v), lt)
    return types, before, image
