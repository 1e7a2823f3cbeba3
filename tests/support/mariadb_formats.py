"""The MariaDB binlog (`tests.support.mariadb_source`) encoded as TDSQL binlog JSON, Canal
protobuf and Canal flat JSON, DDL included, as those producers write them (test fixture code).
Every value is rendered as MySQL prints it (`_text`); BLOB columns are not supported here."""

from __future__ import annotations

from typing import Any

import orjson

from recon._proto import canal_entry_pb2 as ce
from recon._proto import canal_packet_pb2 as cp
from tests.support.mariadb_source import BinlogTxn, Ddl, Records, RowChange, TypesAt, types_at

# java.sql.Types of the column types the schema-change workload uses
_SQL_TYPES = {"int": 4, "bigint": -5, "decimal": 3, "varchar": 12, "char": 1, "tinyint": -6}


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def _sql_literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(v)


def _sql_type(mysql_type: str) -> int:
    return _SQL_TYPES.get(mysql_type.split("(")[0].split()[0], 12)


def encode_tdsql(txns: list[BinlogTxn], all_types: TypesAt) -> Records:
    """TDSQL: gtid / row events with positional SQL literals / query (DDL) / xid."""
    out: Records = []
    for t in txns:

        def msg(kind: str, code: int, idx: int, db: str, table: str, **extra: Any) -> bytes:
            d = {
                "logtype": "mysqlbinlog",
                "eventtype": code,
                "eventtypestr": kind,
                "db": db,
                "table": table,
                "begintime": t.ts_ms // 1000,
                "gtid": t.gtid,
                "event_index": str(idx),
                **extra,
            }
            return orjson.dumps(d)

        first = t.items[0] if t.items else None
        db0, tb0 = (first.db, first.table) if first else ("", "")
        if first is not None and isinstance(first, Ddl):
            out.append((t.ts_ms, None, msg("query", 2, 1, first.db, first.table, sql=first.sql)))
            continue
        out.append((t.ts_ms, None, msg("gtid", 33, 1, db0, tb0)))
        for i, it in enumerate(t.items):
            assert isinstance(it, RowChange)
            cols = list(types_at(all_types, t)[it.table])
            code = {"insert": 30, "update": 31, "delete": 32}[it.op]
            where = [_sql_literal(it.before[c]) for c in cols] if it.before else []
            field = [_sql_literal(it.after[c]) for c in cols] if it.after else []
            out.append(
                (t.ts_ms, None, msg(it.op, code, 2 + i, it.db, it.table, where=where, field=field))
            )
        out.append((t.ts_ms, None, msg("xid", 16, 2 + len(t.items), db0, tb0, xid=str(t.seq))))
    return out


def _canal_columns(img: dict[str, Any], changed: set[str], ctypes: dict[str, str], pk: list[str]):  # type: ignore[no-untyped-def]
    return [
        ce.Column(
            index=i,
            sqlType=_sql_type(ctypes[c]),
            name=c,
            isKey=c in pk,
            updated=c in changed,
            isNull=img[c] is None,
            value=_text(img[c]) or "",
            mysqlType=ctypes[c],
        )
        for i, c in enumerate(img)
    ]


def encode_canal_pb(txns: list[BinlogTxn], all_types: TypesAt) -> Records:
    """Canal protobuf: one Packet per transaction (BEGIN, row changes or DDL, END)."""
    out: Records = []
    for t in txns:
        types = types_at(all_types, t)

        def hdr(db: str, table: str, pos: int, et: int | None = None) -> ce.Header:
            h = ce.Header(
                logfileName=t.file,
                logfileOffset=t.pos + pos,
                serverId=1,
                serverenCode="UTF-8",
                executeTime=t.ts_ms // 1000 * 1000,
                schemaName=db,
                tableName=table,
                props=[ce.Pair(key="curtGtid", value=t.gtid)],
            )
            if et is not None:
                h.eventType = et
            return h

        first = t.items[0] if t.items else None
        db0, tb0 = (first.db, first.table) if first else ("", "")
        entries = []
        if first is not None and isinstance(first, Ddl):
            et = ce.CREATE if first.sql.split()[0].upper() == "CREATE" else ce.ALTER
            rc = ce.RowChange(eventType=et, isDdl=True, sql=first.sql, ddlSchemaName=first.db)
            entries.append(ce.Entry(header=hdr(db0, tb0, 1, et), storeValue=rc.SerializeToString()))
        else:
            begin = ce.TransactionBegin(threadId=7).SerializeToString()
            entries.append(
                ce.Entry(header=hdr(db0, tb0, 0), entryType=ce.TRANSACTIONBEGIN, storeValue=begin)
            )
            for i, it in enumerate(t.items):
                assert isinstance(it, RowChange)
                et = {"insert": ce.INSERT, "update": ce.UPDATE, "delete": ce.DELETE}[it.op]
                ct = types[it.table]
                changed = (
                    {c for c in it.after if it.before[c] != it.after[c]}
                    if it.before and it.after
                    else set()
                )
                rd = ce.RowData(
                    beforeColumns=_canal_columns(it.before, set(), ct, it.pk) if it.before else [],
                    afterColumns=_canal_columns(it.after, changed, ct, it.pk) if it.after else [],
                )
                rc = ce.RowChange(eventType=et, rowDatas=[rd])
                entries.append(
                    ce.Entry(
                        header=hdr(it.db, it.table, 100 + i, et), storeValue=rc.SerializeToString()
                    )
                )
            end = ce.TransactionEnd(transactionId=str(t.seq)).SerializeToString()
            entries.append(
                ce.Entry(header=hdr(db0, tb0, 999), entryType=ce.TRANSACTIONEND, storeValue=end)
            )
        msgs = cp.Messages(batch_id=t.seq, messages=[e.SerializeToString() for e in entries])
        packet = cp.Packet(version=1, type=cp.MESSAGES, body=msgs.SerializeToString())
        out.append((t.ts_ms, None, packet.SerializeToString()))
    return out


def encode_canal_json(txns: list[BinlogTxn], all_types: TypesAt) -> Records:
    """Canal flat JSON: one message per row change, one per DDL (`isDdl`)."""
    out: Records = []
    for t in txns:
        types = types_at(all_types, t)
        for it in t.items:
            base: dict[str, Any] = {
                "database": it.db,
                "table": it.table,
                "es": t.ts_ms // 1000 * 1000,
                "ts": t.ts_ms + 5,
                "id": t.seq,
                "gtid": t.gtid,
            }
            if isinstance(it, Ddl):
                msg = {**base, "isDdl": True, "sql": it.sql, "type": it.sql.split()[0].upper()}
                msg.update(data=None, old=None, mysqlType=None, sqlType=None, pkNames=None)
                out.append((t.ts_ms, None, orjson.dumps(msg)))
                continue
            img = it.after if it.after is not None else it.before
            assert img is not None
            ct = types[it.table]
            old = None
            if it.op == "update" and it.before and it.after:
                old = [{c: _text(it.before[c]) for c in img if it.before[c] != it.after[c]}]
            msg = {
                **base,
                "isDdl": False,
                "sql": "",
                "type": it.op.upper(),
                "data": [{c: _text(img[c]) for c in img}],
                "old": old,
                "mysqlType": {c: ct[c] for c in img},
                "sqlType": {c: _sql_type(ct[c]) for c in img},
                "pkNames": it.pk or None,
            }
            out.append((t.ts_ms, None, orjson.dumps(msg)))
    return out
