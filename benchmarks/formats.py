"""The benchmark's message kinds per format (templates + how a plan fills them), and the naive
Spark job a user would write for each: parse with a schema (`from_json`; for protobuf a Python
UDF with the generated classes), keep the last change per key by the sequence (`max_by`),
drop deleted keys, write Parquet."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.gen import (
    DELETE,
    INSERT,
    SERVER_UUID,
    UPDATE,
    Message,
    Plan,
    b64,
    const,
    digits,
    image,
    join,
    json_template,
    marker_template,
    sbytes,
    varint5,
)
from recon._proto import tencent_subscribe_pb2 as pb
from recon.demo.sample import DBZ_FIELDS, MYSQL_TYPES

DW_SEQ0 = 1_731_663_842_292_000_000
COLS = ("id", "customer", "amount", "status", "updated_at", "note")


def _amount_text(cents: np.ndarray) -> np.ndarray:
    return join(digits(cents // 100, 5), const(b".", len(cents)), digits(cents % 100, 2))


# ---- DataWorks JSON ----


def _dw_image(prefix: str) -> dict[str, Any]:
    return {
        "dataColumn": {
            "id": f"@@#{prefix}id:7@@",
            "customer": f"@@{prefix}cust:8@@",
            "amount": f"@@{prefix}amount:8@@",
            "status": f"@@{prefix}status:4@@",
            "updated_at": f"@@#{prefix}upd:13@@",
            "note": f"@@{prefix}note:8@@",
        }
    }


def _dw_doc(op: str, before: bool, after: bool) -> dict[str, Any]:
    cols = [("id", "LONG"), ("customer", "STRING"), ("amount", "STRING"), ("status", "STRING")]
    cols += [("updated_at", "DATE"), ("note", "BYTES")]
    return {
        "schema": {
            "dataColumn": [{"name": n, "type": t} for n, t in cols],
            "primaryKey": ["id"],
            "source": {"dbType": "MySQL", "dbName": "shop", "tableName": "orders"},
        },
        "payload": {
            "before": _dw_image("b_") if before else None,
            "after": _dw_image("a_") if after else None,
            "sequenceId": "@@seq:19@@",
            "op": op,
            "timestamp": {
                "eventTime": "@@#ts:13@@",
                "systemTime": "@@#ts:13@@",
                "checkpointTime": "@@#ts:13@@",
            },
            "ddl": None,
        },
        "version": "0.0.1",
    }


def _json_image(p: Plan, sel: np.ndarray, which: str, prefix: str) -> dict[str, np.ndarray]:
    img = image(p, sel, which)
    n = len(sel)
    return {
        f"{prefix}id": digits(img["id"], 7),
        f"{prefix}cust": join(const(b"c", n), digits(img["id"], 7)),
        f"{prefix}status": img["status"],
        f"{prefix}upd": digits(img["updated_ms"], 13),
        f"{prefix}note": b64(img["note"]),
        f"{prefix}amount_text": _amount_text(img["amount"]),
        f"{prefix}amount_b64": b64(sbytes(img["amount"])),
    }


def _json_images(
    p: Plan, sel: np.ndarray, before: bool, after: bool, amount: str
) -> dict[str, np.ndarray]:
    """The slots of the images a message carries; `amount`: the rendering of the DECIMAL
    (`amount_text` for DataWorks' string, `amount_b64` for Debezium's bytes)."""
    out: dict[str, np.ndarray] = {}
    for flag, which, prefix in ((before, "before", "b_"), (after, "after", "a_")):
        if flag:
            img = _json_image(p, sel, which, prefix)
            img[f"{prefix}amount"] = img[f"{prefix}{amount}"]
            out.update(img)
    return out


def _dw_values(before: bool, after: bool) -> Any:
    def values(p: Plan, sel: np.ndarray, offset: np.ndarray) -> dict[str, np.ndarray]:
        out = {"seq": digits(DW_SEQ0 + sel, 19), "ts": digits(p.ts_ms[sel], 13)}
        return out | _json_images(p, sel, before, after, "amount_text")

    return values


def dataworks_kinds() -> list[Message]:
    return [
        Message((INSERT,), json_template(_dw_doc("INSERT", False, True)), _dw_values(False, True)),
        Message(
            (UPDATE,), json_template(_dw_doc("UPDATE_BEFOR", True, False)), _dw_values(True, False)
        ),
        Message(
            (UPDATE,), json_template(_dw_doc("UPDATE_AFTER", False, True)), _dw_values(False, True)
        ),
        Message((DELETE,), json_template(_dw_doc("DELETE", True, False)), _dw_values(True, False)),
    ]


# ---- Debezium JSON (with schemas, as its JSON converter writes by default) ----

_DBZ_SOURCE = [
    {"type": "string", "optional": False, "field": f}
    for f in ("version", "connector", "name", "db", "table", "file", "gtid", "snapshot")
] + [{"type": "int64", "optional": False, "field": f} for f in ("ts_ms", "server_id", "pos", "row")]


def _dbz_image(prefix: str) -> dict[str, Any]:
    return {
        "id": f"@@#{prefix}id:7@@",
        "customer": f"@@{prefix}cust:8@@",
        "amount": f"@@{prefix}amount:4@@",
        "status": f"@@{prefix}status:4@@",
        "updated_at": f"@@#{prefix}upd:13@@",
        "note": f"@@{prefix}note:8@@",
    }


def _dbz_doc(op: str, before: bool, after: bool) -> dict[str, Any]:
    schema = {
        "type": "struct",
        "name": "bench.shop.orders.Envelope",
        "optional": False,
        "fields": [
            {"type": "struct", "fields": DBZ_FIELDS, "optional": True, "field": "before"},
            {"type": "struct", "fields": DBZ_FIELDS, "optional": True, "field": "after"},
            {"type": "struct", "fields": _DBZ_SOURCE, "optional": False, "field": "source"},
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
    }
    source = {
        "version": "2.7.0.Final",
        "connector": "mysql",
        "name": "bench",
        "ts_ms": "@@#ts:13@@",
        "snapshot": "false",
        "db": "shop",
        "table": "orders",
        "server_id": 1,
        "gtid": f"{SERVER_UUID}:@@gno:9@@",  # the transaction's GTID (formats.md 4)
        "file": "mysql-bin.000001",
        "pos": "@@#pos:10@@",
        "row": 0,
    }
    payload = {
        "before": _dbz_image("b_") if before else None,
        "after": _dbz_image("a_") if after else None,
        "source": source,
        "op": op,
        "ts_ms": "@@#ts:13@@",
    }
    return {"schema": schema, "payload": payload}


def _dbz_values(before: bool, after: bool) -> Any:
    def values(p: Plan, sel: np.ndarray, offset: np.ndarray) -> dict[str, np.ndarray]:
        out = {
            "ts": digits(p.ts_ms[sel], 13),
            "gno": digits(100_000_000 + sel, 9),
            "pos": digits(1_000_000_000 + sel * 10, 10),
        }
        return out | _json_images(p, sel, before, after, "amount_b64")

    return values


def _dbz_key(p: Plan, sel: np.ndarray) -> np.ndarray:
    n = len(sel)
    return join(const(b'{"id":', n), digits(p.key[sel] + 1_000_000, 7), const(b"}", n))


def debezium_kinds() -> list[Message]:
    def kind(ops: tuple[int, ...], op: str, before: bool, after: bool) -> Message:
        return Message(
            ops, json_template(_dbz_doc(op, before, after)), _dbz_values(before, after), _dbz_key
        )

    return [
        kind((INSERT,), "c", False, True),
        kind((UPDATE,), "u", True, True),
        kind((DELETE,), "d", True, False),
        Message((DELETE,), None, _dbz_values(False, False), _dbz_key),  # the tombstone
    ]


# ---- Tencent DTS protobuf ----

_PB_SENTINEL = {"ts": 2**31 + 777, "pos": 2**34 + 111, "seq0": 2**34 + 201, "seq1": 2**34 + 202}
_PB_SENTINEL["seq2"] = 2**34 + 203
SEQ0 = 2**28


def _pb_image_markers(upper: bool) -> dict[str, bytes]:
    def m(c: str, w: int) -> bytes:
        return (c.upper() if upper else c.lower()).encode() * w

    tag = "a_" if upper else "b_"
    return {
        f"{tag}id": m("i", 7),
        f"{tag}cust": m("c", 8),
        f"{tag}amount": m("m", 8),
        f"{tag}status": m("s", 4),
        f"{tag}upd": m("u", 19),
        f"{tag}note": bytes([0xF1, 0xF2, 0xF3, 0xF4]) if upper else bytes([0xE1, 0xE2, 0xE3, 0xE4]),
    }


def _pb_columns(markers: dict[str, bytes], tag: str) -> list[Any]:
    return [
        pb.Data(dataType=pb.INT32, sv=markers[f"{tag}id"].decode()),
        pb.Data(dataType=pb.STRING, charset="utf8mb4", bv=markers[f"{tag}cust"]),
        pb.Data(dataType=pb.DECIMAL, sv=markers[f"{tag}amount"].decode()),
        pb.Data(dataType=pb.STRING, charset="utf8mb4", bv=markers[f"{tag}status"]),
        pb.Data(dataType=pb.STRING, charset="utf8mb4", bv=markers[f"{tag}upd"]),
        pb.Data(dataType=pb.BYTES, bv=markers[f"{tag}note"]),
    ]


def _pb_template(op: int) -> Any:
    markers = {"gno": b"G" * 9}
    gtid = f"{SERVER_UUID}:{'G' * 9}"

    def header(mt: int, seq: str) -> Any:
        return pb.Header(
            version=1, sourceType=pb.MYSQL, messageType=mt, timestamp=_PB_SENTINEL["ts"],
            serverId=1, fileName="mysql-bin.000001", position=_PB_SENTINEL["pos"], gtid=gtid,
            schemaName="shop", tableName="orders", seqId=_PB_SENTINEL[seq],
        )  # fmt: skip

    old = _pb_image_markers(False) if op in (UPDATE, DELETE) else {}
    new = _pb_image_markers(True) if op in (INSERT, UPDATE) else {}
    markers |= old | new
    rc = pb.RowChange(
        oldColumns=_pb_columns(old, "b_") if old else [],
        newColumns=_pb_columns(new, "a_") if new else [],
    )
    cols = [pb.Column(name=c, originalType=MYSQL_TYPES[c], isKey=(c == "id")) for c in COLS]
    dml_type = {INSERT: pb.INSERT, UPDATE: pb.UPDATE, DELETE: pb.DELETE}[op]
    items = [
        pb.Entry(header=header(pb.BEGIN, "seq0"), event=pb.Event(beginEvent=pb.BeginEvent(transactionId=gtid, threadId=7))),
        pb.Entry(header=header(pb.DML, "seq1"), event=pb.Event(dmlEvent=pb.DMLEvent(dmlEventType=dml_type, columns=cols, rows=[rc]))),
        pb.Entry(header=header(pb.COMMIT, "seq2"), event=pb.Event(commitEvent=pb.CommitEvent(transactionId=gtid))),
    ]  # fmt: skip
    data = pb.Envelope(version=1, total=1, data=pb.Entries(items=items).SerializeToString())
    for name, v in _PB_SENTINEL.items():
        markers[name] = varint5(np.array([v])).tobytes()
    return marker_template(data.SerializeToString(), markers)


def _pb_values(p: Plan, sel: np.ndarray, offset: np.ndarray) -> dict[str, np.ndarray]:
    n = len(sel)
    secs = p.ts_ms[sel] // 1000
    out = {
        "gno": digits(100_000_000 + sel, 9),
        "ts": varint5(secs),
        "pos": varint5(2**28 + sel * 10),
        "seq0": varint5(SEQ0 + offset * 3),
        "seq1": varint5(SEQ0 + offset * 3 + 1),
        "seq2": varint5(SEQ0 + offset * 3 + 2),
    }
    for which, tag in (("before", "b_"), ("after", "a_")):
        if which == "before" and not (p.prev[sel] >= 0).all():
            continue
        if which == "after" and (p.op[sel] == DELETE).all():
            continue
        img = image(p, sel, which)
        s = img["updated_ms"] // 1000 % 86400
        out |= {
            f"{tag}id": digits(img["id"], 7),
            f"{tag}cust": join(const(b"c", n), digits(img["id"], 7)),
            f"{tag}amount": _amount_text(img["amount"]),
            f"{tag}status": img["status"],
            f"{tag}upd": join(
                const(p.hour.strftime("%Y-%m-%d ").encode(), n),
                digits(s // 3600, 2),
                const(b":", n),
                digits(s // 60 % 60, 2),
                const(b":", n),
                digits(s % 60, 2),
            ),  # fmt: skip
            f"{tag}note": img["note"],
        }
    return out


def tencent_kinds() -> list[Message]:
    return [Message((op,), _pb_template(op), _pb_values) for op in (INSERT, UPDATE, DELETE)]


KINDS = {
    "dataworks_json": dataworks_kinds,
    "debezium_json": debezium_kinds,
    "tencent_dts_pb": tencent_kinds,
}
