"""Sample CDC streams: a simulated source workload encoded into each of the six formats.

Used by `recon demo` (a realistic dump: several hours, duplicates, segmented Tencent envelopes
straddling an hour, transactions) and by tests as fixture code. Tencent DTS messages in
particular are built here from the proto because no captured sample is public
(shared/cdc-vectors/tencent-dts-protobuf/README.md): they are labelled as built, not captured.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import orjson

from recon._proto import canal_entry_pb2 as ce
from recon._proto import canal_packet_pb2 as cp
from recon._proto import tencent_subscribe_pb2 as pb
from recon.core.model import RawRecord
from recon.formats import FORMAT_SPECS, load_object

SERVER_UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
TABLE_DB, TABLE_NAME = "shop", "orders"
COLUMNS = ["id", "customer", "amount", "status", "updated_at", "note"]
MYSQL_TYPES = {
    "id": "int(11)",
    "customer": "varchar(32)",
    "amount": "decimal(10,2)",
    "status": "varchar(16)",
    "updated_at": "datetime",
    "note": "varbinary(16)",
}
CREATE_SQL = (
    "CREATE TABLE orders (id INT PRIMARY KEY, customer VARCHAR(32), amount DECIMAL(10,2), "
    "status VARCHAR(16), updated_at DATETIME, note VARBINARY(16))"
)


@dataclass
class Change:
    op: str  # insert | update | delete
    before: dict | None
    after: dict | None
    row: int = 0


@dataclass
class Txn:
    gtid_no: int
    file: str
    pos: int
    ts_ms: int
    changes: list[Change] = field(default_factory=list)

    @property
    def gtid(self) -> str:
        return f"{SERVER_UUID}:{self.gtid_no}"


def workload(start: datetime, hours: int, txns_per_hour: int = 12, seed: int = 7) -> list[Txn]:
    """Random but reproducible transactions on shop.orders: inserts, updates, deletes,
    primary-key changes and re-inserts of deleted keys, spread evenly over the hours."""
    rnd = random.Random(seed)
    rows: dict[int, dict] = {}
    next_id = 1
    txns = []
    pos = 4
    n_total = hours * txns_per_hour
    step = 3600_000 // txns_per_hour
    base_ms = int(start.timestamp() * 1000)
    for t in range(n_total):
        ts = base_ms + t * step + rnd.randrange(step // 2)
        txn = Txn(gtid_no=t + 1, file=f"mysql-bin.{1 + t // 20:06d}", pos=pos, ts_ms=ts)
        pos = 4 if (t + 1) % 20 == 0 else pos + 500
        for _ in range(rnd.randint(1, 3)):
            choice = rnd.random()
            now = datetime(2026, 11, 20) + timedelta(milliseconds=ts - base_ms)
            if not rows or choice < 0.45:
                rid = next_id
                next_id += 1
                row = {
                    "id": rid,
                    "customer": rnd.choice(["ana", "bo", "chen", "dev", "émile"]),
                    "amount": Decimal(rnd.randrange(100, 100000)) / 100,
                    "status": "new",
                    "updated_at": now.replace(microsecond=0),
                    "note": bytes([rnd.randrange(256) for _ in range(4)]),
                }
                rows[rid] = row
                txn.changes.append(Change("insert", None, dict(row)))
            elif choice < 0.8:
                rid = rnd.choice(sorted(rows))
                old = rows[rid]
                new = dict(
                    old,
                    status=rnd.choice(["paid", "shipped", "done"]),
                    amount=old["amount"] + 1,
                    updated_at=now.replace(microsecond=0),
                )
                if rnd.random() < 0.1:
                    new["id"] = next_id  # primary-key change
                    next_id += 1
                    del rows[rid]
                rows[new["id"]] = new
                txn.changes.append(Change("update", dict(old), dict(new)))
            else:
                rid = rnd.choice(sorted(rows))
                old = rows.pop(rid)
                txn.changes.append(Change("delete", dict(old), None))
        for i, ch in enumerate(txn.changes):
            ch.row = i
        txns.append(txn)
    return txns


def final_state(txns: list[Txn]) -> dict[int, dict]:
    rows: dict[int, dict] = {}
    for t in txns:
        for c in t.changes:
            if c.before is not None:
                rows.pop(c.before["id"], None)
            if c.after is not None:
                rows[c.after["id"]] = c.after
    return rows


# -- value rendering ----------------------------------------------------------------------------
def _text(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, bytes):
        return v.decode("latin-1")
    return str(v)


def _sql_literal(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bytes):
        return "X'" + v.hex().upper() + "'"
    if isinstance(v, (int, Decimal)):
        return str(v)
    s = _text(v) or ""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class Out:
    """Kafka records (partition, ts_ms, key, value) in production order for one topic."""

    records: list[tuple[int, int, bytes | None, bytes | None]] = field(default_factory=list)

    def add(self, ts_ms: int, key: bytes | None, value: bytes | None, partition: int = 0) -> None:
        self.records.append((partition, ts_ms, key, value))


def tencent_envelopes(data: bytes, segment_bytes: int) -> list[bytes]:
    """A serialized Entries cut into Envelope segments of at most `segment_bytes`, as DTS does."""

    pieces = [data[i : i + segment_bytes] for i in range(0, len(data), segment_bytes)]
    return [
        pb.Envelope(version=1, total=len(pieces), index=i, data=p).SerializeToString()
        for i, p in enumerate(pieces)
    ]


def encode_tencent(txns: list[Txn], segment_bytes: int = 300, per_message: int = 0) -> Out:
    """`per_message`: at most this many entries a message (a transaction over several, as
    DTS sends a large one); 0: a transaction a message."""

    out = Out()
    seq = 1000

    def datum(col: str, v: object) -> pb.Data:
        if v is None:
            return pb.Data(dataType=pb.NIL)
        if col == "id":
            return pb.Data(dataType=pb.INT32, sv=str(v))
        if col == "amount":
            return pb.Data(dataType=pb.DECIMAL, sv=str(v))
        if col == "note":
            return pb.Data(dataType=pb.BYTES, bv=v)
        return pb.Data(dataType=pb.STRING, charset="utf8mb4", bv=(_text(v) or "").encode())

    cols = [pb.Column(name=c, originalType=MYSQL_TYPES[c], isKey=(c == "id")) for c in COLUMNS]
    for t in txns:

        def header(mt: int, pos: int) -> pb.Header:
            nonlocal seq
            seq += 1
            return pb.Header(
                version=1,
                sourceType=pb.MYSQL,
                messageType=mt,
                timestamp=t.ts_ms // 1000,
                serverId=1,
                fileName=t.file,
                position=pos,
                gtid=t.gtid,
                schemaName=TABLE_DB,
                tableName=TABLE_NAME,
                seqId=seq,
            )

        items = [
            pb.Entry(
                header=header(pb.BEGIN, t.pos),
                event=pb.Event(beginEvent=pb.BeginEvent(transactionId=t.gtid, threadId=7)),
            )
        ]
        for ch in t.changes:
            dml_type = {"insert": pb.INSERT, "update": pb.UPDATE, "delete": pb.DELETE}[ch.op]
            rc = pb.RowChange(
                oldColumns=[datum(c, ch.before[c]) for c in COLUMNS] if ch.before else [],
                newColumns=[datum(c, ch.after[c]) for c in COLUMNS] if ch.after else [],
            )
            items.append(
                pb.Entry(
                    header=header(pb.DML, t.pos + 100 + ch.row),
                    event=pb.Event(
                        dmlEvent=pb.DMLEvent(dmlEventType=dml_type, columns=cols, rows=[rc])
                    ),
                )
            )
        items.append(
            pb.Entry(
                header=header(pb.COMMIT, t.pos + 400),
                event=pb.Event(commitEvent=pb.CommitEvent(transactionId=t.gtid)),
            )
        )
        n = per_message or len(items)
        for k in range(0, len(items), n):
            data = pb.Entries(items=items[k : k + n]).SerializeToString()
            for i, env in enumerate(tencent_envelopes(data, segment_bytes)):
                out.add(t.ts_ms + k + i, None, env)
        if t.gtid_no % 5 == 0:
            hb = pb.Entries(
                items=[
                    pb.Entry(
                        header=pb.Header(messageType=pb.CHECKPOINT, seqId=0),
                        event=pb.Event(
                            checkpointEvent=pb.CheckpointEvent(
                                syncedGtid=f"{SERVER_UUID}:1-{t.gtid_no}"
                            )
                        ),
                    )
                ]
            )
            out.add(
                t.ts_ms + 50,
                None,
                pb.Envelope(version=1, total=1, data=hb.SerializeToString()).SerializeToString(),
            )
    return out


def encode_tdsql(txns: list[Txn]) -> Out:
    out = Out()
    for t in txns:

        def msg(kind: str, code: int, idx: int, **extra: object) -> bytes:
            d = {
                "logtype": "mysqlbinlog",
                "eventtype": code,
                "eventtypestr": kind,
                "db": TABLE_DB,
                "table": TABLE_NAME,
                "localip": "127.0.0.1",
                "localport": 3306,
                "begintime": t.ts_ms // 1000,
                "gtid": t.gtid,
                "event_index": str(idx),
            }
            d.update(extra)
            return orjson.dumps(d)

        out.add(t.ts_ms, None, msg("gtid", 33, 1))
        for ch in t.changes:
            code = {"insert": 30, "update": 31, "delete": 32}[ch.op]
            out.add(
                t.ts_ms,
                None,
                msg(
                    ch.op,
                    code,
                    3 + ch.row,
                    where=[_sql_literal(ch.before[c]) for c in COLUMNS] if ch.before else [],
                    field=[_sql_literal(ch.after[c]) for c in COLUMNS] if ch.after else [],
                ),
            )
        out.add(t.ts_ms, None, msg("xid", 16, 3 + len(t.changes), xid=str(9000 + t.gtid_no)))
    return out


def encode_canal_pb(txns: list[Txn], per_message: int = 0) -> Out:
    """`per_message`: at most this many entries a message (Canal batches entries by count, not
    by transaction); 0: a transaction a message."""

    out = Out()
    sql_types = {"id": 4, "customer": 12, "amount": 3, "status": 12, "updated_at": 93, "note": -3}
    for t in txns:

        def hdr(et: int | None = None, pos: int = 0) -> ce.Header:
            h = ce.Header(
                logfileName=t.file,
                logfileOffset=t.pos + pos,
                serverId=1,
                serverenCode="UTF-8",
                executeTime=t.ts_ms // 1000 * 1000,
                schemaName=TABLE_DB,
                tableName=TABLE_NAME,
                props=[ce.Pair(key="curtGtid", value=t.gtid)],
            )
            if et is not None:
                h.eventType = et
            return h

        def cols(img: dict, changed: set[str]) -> list[ce.Column]:
            return [
                ce.Column(
                    index=i,
                    sqlType=sql_types[c],
                    name=c,
                    isKey=(c == "id"),
                    updated=c in changed,
                    isNull=img[c] is None,
                    value=_text(img[c]) or "",
                    mysqlType=MYSQL_TYPES[c],
                )
                for i, c in enumerate(COLUMNS)
            ]

        entries = [
            ce.Entry(
                header=hdr(),
                entryType=ce.TRANSACTIONBEGIN,
                storeValue=ce.TransactionBegin(threadId=7).SerializeToString(),
            )
        ]
        for ch in t.changes:
            et = {"insert": ce.INSERT, "update": ce.UPDATE, "delete": ce.DELETE}[ch.op]
            changed = {c for c in COLUMNS if ch.before and ch.after and ch.before[c] != ch.after[c]}
            rd = ce.RowData(
                beforeColumns=cols(ch.before, set()) if ch.before else [],
                afterColumns=cols(ch.after, changed) if ch.after else [],
            )
            rc = ce.RowChange(eventType=et, rowDatas=[rd])
            # UPDATE is the proto2 default: leave it off the wire, as Canal's Java may
            e = ce.Entry(
                header=hdr(None if et == ce.UPDATE else et, 100 + ch.row),
                storeValue=rc.SerializeToString(),
            )
            entries.append(e)
        entries.append(
            ce.Entry(
                header=hdr(pos=400),
                entryType=ce.TRANSACTIONEND,
                storeValue=ce.TransactionEnd(transactionId=str(t.gtid_no)).SerializeToString(),
            )
        )
        n = per_message or len(entries)
        for k in range(0, len(entries), n):
            msgs = cp.Messages(
                batch_id=t.gtid_no * 1000 + k,
                messages=[e.SerializeToString() for e in entries[k : k + n]],
            )
            out.add(
                t.ts_ms + k,
                None,
                cp.Packet(
                    version=1, type=cp.MESSAGES, body=msgs.SerializeToString()
                ).SerializeToString(),
            )
    return out


def encode_canal_json(txns: list[Txn]) -> Out:
    out = Out()
    sql_types = {"id": 4, "customer": 12, "amount": 3, "status": 12, "updated_at": 93, "note": -3}
    for t in txns:
        for ch in t.changes:
            img = ch.after if ch.after is not None else ch.before
            assert img is not None
            old = None
            if ch.op == "update" and ch.before and ch.after:
                old = [{c: _text(ch.before[c]) for c in COLUMNS if ch.before[c] != ch.after[c]}]
            msg = {
                "data": [{c: _text(img[c]) for c in COLUMNS}],
                "database": TABLE_DB,
                "es": t.ts_ms // 1000 * 1000,
                "id": t.gtid_no,
                "isDdl": False,
                "mysqlType": MYSQL_TYPES,
                "old": old,
                "pkNames": ["id"],
                "sql": "",
                "sqlType": sql_types,
                "table": TABLE_NAME,
                "ts": t.ts_ms + 5,
                "type": ch.op.upper(),
                "gtid": f"{SERVER_UUID}:1-{t.gtid_no}",
            }
            out.add(t.ts_ms, None, orjson.dumps(msg))
    return out


def _dbz_value(c: str, v: object) -> object:
    if v is None:
        return None
    if c == "amount":
        unscaled = int(Decimal(str(v)) * 100)
        n = (unscaled.bit_length() + 8) // 8
        return base64.b64encode(unscaled.to_bytes(n, "big", signed=True)).decode()
    if c == "updated_at":
        assert isinstance(v, datetime)
        return int(v.replace(tzinfo=UTC).timestamp() * 1000)
    if c == "note":
        assert isinstance(v, bytes)
        return base64.b64encode(v).decode()
    return v


DBZ_FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "field": "customer"},
    {
        "type": "bytes",
        "optional": True,
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        "field": "amount",
    },
    {"type": "string", "optional": True, "field": "status"},
    {
        "type": "int64",
        "optional": True,
        "name": "io.debezium.time.Timestamp",
        "field": "updated_at",
    },
    {"type": "bytes", "optional": True, "field": "note"},
]


def encode_debezium(txns: list[Txn], snapshot_rows: list[dict] | None = None) -> Out:
    out = Out()
    schema = {
        "type": "struct",
        "name": "demo.shop.orders.Envelope",
        "fields": [
            {"type": "struct", "fields": DBZ_FIELDS, "optional": True, "field": "before"},
            {"type": "struct", "fields": DBZ_FIELDS, "optional": True, "field": "after"},
            {"type": "struct", "fields": [], "optional": False, "field": "source"},
            {"type": "string", "optional": False, "field": "op"},
        ],
    }

    def rec(op: str, before: dict | None, after: dict | None, src: dict, ts: int) -> None:
        key_row = after if after is not None else before
        assert key_row is not None
        key = orjson.dumps({"id": key_row["id"]})
        payload = {
            "before": {c: _dbz_value(c, before[c]) for c in COLUMNS} if before else None,
            "after": {c: _dbz_value(c, after[c]) for c in COLUMNS} if after else None,
            "source": dict(
                {
                    "version": "2.7.0.Final",
                    "connector": "mysql",
                    "name": "demo",
                    "db": TABLE_DB,
                    "table": TABLE_NAME,
                    "server_id": 1,
                },
                **src,
            ),
            "op": op,
            "ts_ms": ts + 7,
        }
        out.add(ts, key, orjson.dumps({"schema": schema, "payload": payload}))
        if op == "d":
            out.add(ts, key, None)  # Debezium tombstone

    for row in snapshot_rows or []:
        rec(
            "r",
            None,
            row,
            {"snapshot": "true", "file": "mysql-bin.000001", "pos": 4, "row": 0, "ts_ms": 0},
            txns[0].ts_ms - 1000 if txns else 0,
        )
    for t in txns:
        for ch in t.changes:
            op = {"insert": "c", "update": "u", "delete": "d"}[ch.op]
            rec(
                op,
                ch.before,
                ch.after,
                {
                    "file": t.file,
                    "pos": t.pos,
                    "row": ch.row,
                    "gtid": t.gtid,
                    "ts_ms": t.ts_ms,
                    "snapshot": "false",
                },
                t.ts_ms,
            )
    return out


def encode_dataworks(txns: list[Txn]) -> Out:
    out = Out()
    cols_schema = [
        {"name": "id", "type": "LONG"},
        {"name": "customer", "type": "STRING"},
        {"name": "amount", "type": "STRING"},
        {"name": "status", "type": "STRING"},
        {"name": "updated_at", "type": "DATE"},
        {"name": "note", "type": "BYTES"},
    ]
    seq = 1_731_663_842_292_000_000

    def dw(v: object, c: str) -> object:
        # as Debezium's encoding (epoch ms, base64), except DECIMAL travels as a STRING
        return str(v) if c == "amount" and v is not None else _dbz_value(c, v)

    def msg(op: str, before: dict | None, after: dict | None, seq_id: int, ts: int) -> bytes:
        return orjson.dumps(
            {
                "schema": {
                    "dataColumn": cols_schema,
                    "primaryKey": ["id"],
                    "source": {"dbType": "MySQL", "dbName": TABLE_DB, "tableName": TABLE_NAME},
                },
                "payload": {
                    "before": {"dataColumn": {c: dw(before[c], c) for c in COLUMNS}}
                    if before
                    else None,
                    "after": {"dataColumn": {c: dw(after[c], c) for c in COLUMNS}}
                    if after
                    else None,
                    "sequenceId": str(seq_id),
                    "op": op,
                    "timestamp": {"eventTime": ts, "systemTime": ts + 9, "checkpointTime": ts},
                    "ddl": None,
                },
                "version": "0.0.1",
            }
        )

    for t in txns:
        for ch in t.changes:
            seq += 1
            if ch.op == "update":
                out.add(t.ts_ms, None, msg("UPDATE_BEFOR", ch.before, None, seq, t.ts_ms))
                out.add(t.ts_ms, None, msg("UPDATE_AFTER", None, ch.after, seq, t.ts_ms))
            else:
                out.add(t.ts_ms, None, msg(ch.op.upper(), ch.before, ch.after, seq, t.ts_ms))
        if t.gtid_no % 6 == 0:
            out.add(
                t.ts_ms + 1,
                None,
                orjson.dumps(
                    {
                        "schema": {"dataColumn": None, "primaryKey": None, "source": None},
                        "payload": {
                            "before": None,
                            "after": None,
                            "sequenceId": None,
                            "op": "MHEARTBEAT",
                            "timestamp": {"eventTime": t.ts_ms + 1, "checkpointTime": t.ts_ms + 1},
                            "ddl": None,
                        },
                        "version": "0.0.1",
                    }
                ),
            )
    return out


def to_records(out: Out, topic: str, first_offset: int = 0) -> list[RawRecord]:
    """Assign consecutive offsets per partition, in production order."""
    next_off: dict[int, int] = {}
    recs = []
    for partition, ts, key, value in out.records:
        off = next_off.get(partition, first_offset)
        next_off[partition] = off + 1
        recs.append(RawRecord(topic, partition, off, key, value, ts))
    return recs


# the sample encoder of every format, from the format table (this module is already loaded)
ENCODERS: dict[str, Callable[..., Out]] = {
    name: load_object(spec.sample_encoder) for name, spec in FORMAT_SPECS.items()
}
