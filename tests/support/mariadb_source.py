"""A throwaway MariaDB server, its binlog read back with mysql-replication, and the binlog encoded
into vendor formats as their producers would write it (test fixture code).

The server runs from Debian's `mariadbd` in a temporary folder (no system service, no network
beyond 127.0.0.1), with row-based binlog and full row metadata so column names come with every
rows event. The encoders take nothing from the workload's own bookkeeping: every change they
write was read back from the binlog.
"""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

from recon.core.values import mysql_logical_type
from recon.demo.sample import tencent_envelopes

SERVER_ID = 1


class MariaDB:
    """`mariadbd` in a temp dir; `connect()` gives a pymysql connection as root."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.data = base / "data"
        self.sock = base / "mysqld.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> MariaDB:
        for tool in ("mariadbd", "mariadb-install-db"):
            if shutil.which(tool) is None:
                raise RuntimeError(
                    f"{tool} not found: install Debian's mariadb-server (scripts/setup.sh does "
                    "it when run as root)"
                )
        self.base.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "mariadb-install-db",
                "--no-defaults",
                f"--datadir={self.data}",
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            check=True,
            capture_output=True,
        )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        log = (self.base / "server.log").open("wb")
        self.proc = subprocess.Popen(
            [
                "mariadbd",
                "--no-defaults",
                f"--datadir={self.data}",
                "--user=root",
                f"--socket={self.sock}",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                f"--log-bin={self.data}/mysql-bin",
                "--binlog-format=ROW",
                "--binlog-row-image=FULL",
                "--binlog-row-metadata=FULL",
                f"--server-id={SERVER_ID}",
                "--default-time-zone=+00:00",
                "--innodb-buffer-pool-size=32M",
                "--max-binlog-size=65536",  # several binlog files in one workload
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                self.connect().close()
                return self
            except Exception:  # noqa: BLE001 - not up yet
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        "mariadbd exited: " + (self.base / "server.log").read_text()[-2000:]
                    ) from None
                time.sleep(0.2)
        raise RuntimeError("mariadbd did not accept connections within 60 s")

    def connect(self, db: str | None = None) -> Any:
        import pymysql

        return pymysql.connect(
            unix_socket=str(self.sock),
            user="root",
            password="",
            database=db,
            autocommit=True,
            init_command="SET time_zone = '+00:00'",
        )

    def settings(self) -> dict[str, Any]:
        return {"unix_socket": str(self.sock), "user": "root", "password": ""}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# -- the binlog, read back ----------------------------------------------------------------------
@dataclass
class RowChange:
    db: str
    table: str
    op: str  # insert | update | delete
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    pk: list[str]


@dataclass
class Ddl:
    db: str
    table: str
    sql: str


@dataclass
class BinlogTxn:
    gtid: str  # MariaDB domain-server-seq
    file: str
    pos: int  # where the transaction's GTID event starts
    items: list[RowChange | Ddl] = field(default_factory=list)
    ts_ms: int = 0  # set by the caller: when the dumper saw it

    @property
    def seq(self) -> int:
        return int(self.gtid.rsplit("-", 1)[1])


def read_binlog(server: MariaDB) -> list[BinlogTxn]:
    """Every transaction of the server's binlog, with the row images and DDL it holds."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    stream = BinLogStreamReader(
        connection_settings=server.settings(),
        server_id=100,
        blocking=False,
        is_mariadb=True,
        only_events=[
            MariadbGtidEvent,
            QueryEvent,
            XidEvent,
            RotateEvent,
            WriteRowsEvent,
            UpdateRowsEvent,
            DeleteRowsEvent,
        ],
    )
    txns: list[BinlogTxn] = []
    cur: BinlogTxn | None = None
    try:
        for ev in stream:
            if isinstance(ev, RotateEvent):
                continue
            if isinstance(ev, MariadbGtidEvent):
                start = stream.log_pos - ev.event_size
                cur = BinlogTxn(ev.gtid, stream.log_file, start)
                txns.append(cur)
                continue
            assert cur is not None, "binlog event outside a GTID transaction"
            if isinstance(ev, QueryEvent):
                sql = ev.query.strip()
                if sql.upper() in ("BEGIN", "COMMIT"):
                    continue
                words = sql.split()
                if len(words) >= 3 and words[1].upper() == "TABLE":
                    name = words[2].strip("`")
                    db, _, tbl = name.rpartition(".")
                    schema = ev.schema.decode() if isinstance(ev.schema, bytes) else ev.schema
                    cur.items.append(Ddl(db or schema, tbl.strip("`"), sql))
                continue
            if isinstance(ev, XidEvent):
                continue
            pk = (
                list(ev.primary_key)
                if isinstance(ev.primary_key, tuple)
                else ([ev.primary_key] if ev.primary_key else [])
            )
            for row in ev.rows:
                if isinstance(ev, WriteRowsEvent):
                    cur.items.append(
                        RowChange(ev.schema, ev.table, "insert", None, row["values"], pk)
                    )
                elif isinstance(ev, DeleteRowsEvent):
                    cur.items.append(
                        RowChange(ev.schema, ev.table, "delete", row["values"], None, pk)
                    )
                else:
                    cur.items.append(
                        RowChange(
                            ev.schema,
                            ev.table,
                            "update",
                            row["before_values"],
                            row["after_values"],
                            pk,
                        )
                    )
    finally:
        stream.close()
    return txns


def gtid_seq(server: MariaDB) -> int:
    """The sequence number of the server's last GTID (MariaDB's `domain-server-seq`)."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@gtid_binlog_pos")
            return int(cur.fetchone()[0].rsplit("-", 1)[1])
    finally:
        conn.close()


def column_types(server: MariaDB, db: str) -> dict[str, dict[str, str]]:
    """table -> column -> MySQL column type text (as in information_schema.COLUMN_TYPE)."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = %s ORDER BY TABLE_NAME, ORDINAL_POSITION",
                (db,),
            )
            out: dict[str, dict[str, str]] = {}
            for t, c, ty in cur.fetchall():
                out.setdefault(t, {})[c] = ty
            return out
    finally:
        conn.close()


# -- encoders -----------------------------------------------------------------------------------
Records = list[tuple[int, bytes | None, bytes | None]]  # (ts_ms, key, value)
Types = dict[str, dict[str, str]]  # table -> column -> MySQL column type
TypesAt = Types | Callable[["BinlogTxn"], Types]
"""The column types, or the column types in force at a transaction (a workload with DDL)."""


def types_at(types: TypesAt, t: BinlogTxn) -> Types:
    return types(t) if callable(types) else types


def _text(v: Any) -> str:
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S") + (f".{v.microsecond:06d}" if v.microsecond else "")
    return str(v)


def _bytes(v: bytes | str) -> bytes:
    """mysql-replication hands some BLOB values (the empty one) over as text."""
    return v if isinstance(v, bytes) else v.encode("utf-8", "surrogateescape")


def _epoch_ms_naive(v: datetime) -> int:
    return int(v.replace(tzinfo=UTC).timestamp() * 1000)


def _dbz_field(col: str, mysql_type: str) -> tuple[dict[str, Any], Any]:
    """A Debezium (MariaDB connector, precise decimal and bigint handling) field and encoder."""
    lt = mysql_logical_type(mysql_type)
    if lt.startswith("decimal(") or lt == "uint64":
        p, s = (20, 0) if lt == "uint64" else map(int, lt[8:-1].split(","))

        def dec(v: Any) -> str:
            unscaled = int(Decimal(v).scaleb(s))
            n = (unscaled.bit_length() + 8) // 8
            return base64.b64encode(unscaled.to_bytes(n, "big", signed=True)).decode()

        return {
            "type": "bytes",
            "optional": True,
            "name": "org.apache.kafka.connect.data.Decimal",
            "parameters": {"scale": str(s), "connect.decimal.precision": str(p)},
            "field": col,
        }, dec
    if lt == "datetime":
        return {
            "type": "int64",
            "optional": True,
            "name": "io.debezium.time.Timestamp",
            "field": col,
        }, _epoch_ms_naive
    if lt == "timestamp":
        return {
            "type": "string",
            "optional": True,
            "name": "io.debezium.time.ZonedTimestamp",
            "field": col,
        }, lambda v: v.strftime("%Y-%m-%dT%H:%M:%SZ")
    if lt == "binary":
        return {"type": "bytes", "optional": True, "field": col}, lambda v: base64.b64encode(
            _bytes(v)
        ).decode()
    if lt in ("int8", "int16", "int32", "uint8", "uint16"):
        return {"type": "int32", "optional": True, "field": col}, int
    if lt in ("int64", "uint32"):
        return {"type": "int64", "optional": True, "field": col}, int
    return {"type": "string", "optional": True, "field": col}, str


def encode_debezium(txns: list[BinlogTxn], all_types: TypesAt) -> Records:
    """Debezium JSON with schemas; DDL as the connector's schema-change events (same topic)."""
    out: Records = []
    for t in txns:
        row_no = 0
        types = types_at(all_types, t)
        for it in t.items:
            if not isinstance(it, RowChange):
                source = {"file": t.file, "pos": t.pos, "gtid": t.gtid, "ts_ms": t.ts_ms}
                change = {"source": source, "databaseName": it.db, "ddl": it.sql}
                out.append((t.ts_ms, None, orjson.dumps({"schema": {}, "payload": change})))
                continue
            cols = list((it.after or it.before or {}).keys())
            fields = [_dbz_field(c, types[it.table][c]) for c in cols]
            for (f, _), c in zip(fields, cols, strict=True):
                # the connector runs with column.propagate.source.type=.* (type name, no length)
                source_type = types[it.table][c].split("(")[0].upper()
                if "unsigned" in types[it.table][c]:
                    source_type += " UNSIGNED"
                f["parameters"] = {
                    **f.get("parameters", {}),
                    "__debezium.source.column.type": source_type,
                }
            schema = {
                "type": "struct",
                "name": f"mdb.{it.db}.{it.table}.Envelope",
                "fields": [
                    {"type": "struct", "fields": [f for f, _ in fields], "field": "before"},
                    {"type": "struct", "fields": [f for f, _ in fields], "field": "after"},
                    {"type": "struct", "fields": [], "field": "source"},
                    {"type": "string", "field": "op"},
                ],
            }

            def img(d: dict[str, Any] | None, fields: Any = fields, cols: list[str] = cols) -> Any:
                if d is None:
                    return None
                return {
                    c: None if d[c] is None else enc(d[c])
                    for c, (_, enc) in zip(cols, fields, strict=True)
                }

            key_row = it.after if it.after is not None else it.before
            assert key_row is not None
            key = orjson.dumps({c: key_row[c] for c in it.pk}) if it.pk else None
            op = {"insert": "c", "update": "u", "delete": "d"}[it.op]
            payload = {
                "before": img(it.before),
                "after": img(it.after),
                "source": {
                    "version": "2.7.0.Final",
                    "connector": "mariadb",
                    "name": "mdb",
                    "ts_ms": t.ts_ms,
                    "snapshot": "false",
                    "db": it.db,
                    "table": it.table,
                    "server_id": SERVER_ID,
                    "gtid": t.gtid,
                    "file": t.file,
                    "pos": t.pos,
                    "row": row_no,
                },
                "op": op,
                "ts_ms": t.ts_ms + 3,
            }
            row_no += 1
            out.append((t.ts_ms, key, orjson.dumps({"schema": schema, "payload": payload})))
            if op == "d" and key is not None:
                out.append((t.ts_ms, key, None))  # tombstone
    return out


def encode_dataworks(txns: list[BinlogTxn], all_types: TypesAt) -> Records:
    """DataWorks real-time sync JSON: coarse types (DECIMAL and BIGINT UNSIGNED as STRING, every
    temporal column as DATE = epoch ms), sequenceId a number that grows with the binlog, DDL as
    an ALTER/CREATE message with `ddl.text`."""
    out: Records = []

    def dw_type(mysql_type: str) -> str:
        lt = mysql_logical_type(mysql_type)
        if lt in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"):
            return "LONG"
        if lt in ("datetime", "timestamp", "date"):
            return "DATE"
        if lt == "binary":
            return "BYTES"
        return "STRING"

    def value(v: Any, kind: str) -> Any:
        if v is None:
            return None
        if kind == "DATE":
            return _epoch_ms_naive(v)
        if kind == "BYTES":
            return base64.b64encode(_bytes(v)).decode()
        if kind == "LONG":
            return int(v)
        return _text(v)

    for t in txns:
        n = 0
        types = types_at(all_types, t)
        for it in t.items:
            if not isinstance(it, RowChange):
                out.append((t.ts_ms, None, _dataworks_ddl(it, dataworks_sequence(t.seq, n), t)))
                n += 1
                continue
            cols = list((it.after or it.before or {}).keys())
            kinds = {c: dw_type(types[it.table][c]) for c in cols}
            schema = {
                "dataColumn": [{"name": c, "type": kinds[c]} for c in cols],
                "primaryKey": it.pk or None,
                "source": {"dbType": "MySQL", "dbName": it.db, "tableName": it.table},
            }

            def msg(op: str, before: Any, after: Any, seq: int, schema: Any = schema) -> bytes:
                def part(d: Any) -> Any:
                    return (
                        None if d is None else {"dataColumn": {c: value(d[c], kinds[c]) for c in d}}
                    )

                return orjson.dumps(
                    {
                        "schema": schema,
                        "payload": {
                            "before": part(before),
                            "after": part(after),
                            "sequenceId": str(seq),
                            "op": op,
                            "timestamp": {
                                "eventTime": t.ts_ms,
                                "systemTime": t.ts_ms + 9,
                                "checkpointTime": t.ts_ms,
                            },
                            "ddl": None,
                        },
                        "version": "0.0.1",
                    }
                )

            seq = dataworks_sequence(t.seq, n)
            n += 1
            if it.op == "update":
                out.append((t.ts_ms, None, msg("UPDATE_BEFOR", it.before, None, seq)))
                out.append((t.ts_ms, None, msg("UPDATE_AFTER", None, it.after, seq)))
            else:
                out.append((t.ts_ms, None, msg(it.op.upper(), it.before, it.after, seq)))
    return out


def _dataworks_ddl(it: Ddl, seq: int, t: BinlogTxn) -> bytes:
    op = it.sql.split()[0].upper()
    return orjson.dumps(
        {
            "schema": {
                "dataColumn": None,
                "primaryKey": None,
                "source": {"dbType": "MySQL", "dbName": it.db, "tableName": it.table},
            },
            "payload": {
                "before": None,
                "after": None,
                "sequenceId": str(seq),
                "op": op if op in ("ALTER", "CREATE") else "ALTER",
                "timestamp": {"eventTime": t.ts_ms, "systemTime": t.ts_ms, "checkpointTime": 0},
                "ddl": {"text": it.sql, "ddlMeta": None},
            },
            "version": "0.0.1",
        }
    )


def dataworks_sequence(gtid_seq: int, row: int) -> int:
    return gtid_seq * 1000 + row


def encode_tencent(txns: list[BinlogTxn], all_types: TypesAt, segment_bytes: int = 400) -> Records:
    """Tencent DTS protobuf: one Entries per transaction (BEGIN, DML/DDL, COMMIT), cut into
    Envelope segments of `segment_bytes`."""
    from recon._proto import tencent_subscribe_pb2 as pb

    int_types = {
        "int8": pb.INT8,
        "int16": pb.INT16,
        "int32": pb.INT32,
        "int64": pb.INT64,
        "uint8": pb.UINT8,
        "uint16": pb.UINT16,
        "uint32": pb.UINT32,
        "uint64": pb.UINT64,
    }

    def datum(v: Any, mysql_type: str) -> Any:
        if v is None:
            return pb.Data(dataType=pb.NIL)
        lt = mysql_logical_type(mysql_type)
        if lt in int_types:
            return pb.Data(dataType=int_types[lt], sv=str(v))
        if lt.startswith("decimal("):
            return pb.Data(dataType=pb.DECIMAL, sv=str(v))
        if lt == "binary":
            return pb.Data(dataType=pb.BYTES, bv=_bytes(v))
        if lt == "timestamp":
            return pb.Data(
                dataType=pb.STRING, charset="utf8mb4", bv=(_text(v) + " +00:00").encode()
            )
        return pb.Data(dataType=pb.STRING, charset="utf8mb4", bv=_text(v).encode())

    out: Records = []
    seq = 5000
    for t in txns:

        def header(mt: int, db: str, table: str, pos: int) -> Any:
            nonlocal seq
            seq += 1
            return pb.Header(
                version=1,
                sourceType=pb.MARIADB,
                messageType=mt,
                timestamp=t.ts_ms // 1000,
                serverId=SERVER_ID,
                fileName=t.file,
                position=pos,
                gtid=t.gtid,
                schemaName=db,
                tableName=table,
                seqId=seq,
            )

        first = next((i for i in t.items if isinstance(i, RowChange | Ddl)), None)
        db0, tb0 = (first.db, first.table) if first else ("", "")
        items = [
            pb.Entry(
                header=header(pb.BEGIN, db0, tb0, t.pos),
                event=pb.Event(beginEvent=pb.BeginEvent(transactionId=t.gtid, threadId=9)),
            )
        ]
        for i, it in enumerate(t.items):
            if isinstance(it, Ddl):
                items.append(
                    pb.Entry(
                        header=header(pb.DDL, it.db, it.table, t.pos + 1 + i),
                        event=pb.Event(ddlEvent=pb.DDLEvent(schemaName=it.db, sql=it.sql)),
                    )
                )
                continue
            img = it.after if it.after is not None else it.before
            assert img is not None
            cols = list(img.keys())
            ctypes = types_at(all_types, t)[it.table]
            columns = [pb.Column(name=c, originalType=ctypes[c], isKey=c in it.pk) for c in cols]
            rc = pb.RowChange(
                oldColumns=[datum(it.before[c], ctypes[c]) for c in cols] if it.before else [],
                newColumns=[datum(it.after[c], ctypes[c]) for c in cols] if it.after else [],
            )
            dml = {"insert": pb.INSERT, "update": pb.UPDATE, "delete": pb.DELETE}[it.op]
            items.append(
                pb.Entry(
                    header=header(pb.DML, it.db, it.table, t.pos + 1 + i),
                    event=pb.Event(
                        dmlEvent=pb.DMLEvent(dmlEventType=dml, columns=columns, rows=[rc])
                    ),
                )
            )
        items.append(
            pb.Entry(
                header=header(pb.COMMIT, db0, tb0, t.pos + 1 + len(t.items)),
                event=pb.Event(commitEvent=pb.CommitEvent(transactionId=t.gtid)),
            )
        )
        data = pb.Entries(items=items).SerializeToString()
        for i, env in enumerate(tencent_envelopes(data, segment_bytes)):
            out.append((t.ts_ms + i, None, env))
    return out
