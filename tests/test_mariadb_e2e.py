"""End to end against a real MariaDB: a random workload on a throwaway server, its binlog read back
with mysql-replication and encoded as Debezium JSON, DataWorks JSON and Tencent DTS protobuf dumps
over three hours, an out-of-band snapshot taken in the middle (the stream still holds the changes
from before it), then `recon run` + `recon export` for each format; every exported table must
equal `SELECT *` on the server at the end.

The workload has primary-key changes, deletes and re-inserts of deleted keys, a table without a
primary key (duplicate rows, DELETE/UPDATE ... LIMIT 1), BIGINT UNSIGNED at its maximum, DECIMAL,
DATETIME, TIMESTAMP, BLOB, non-ASCII text, and an ALTER TABLE ... ADD COLUMN halfway.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from recon.cli import main
from recon.core.model import RawRecord
from recon.demo.demo import write_dump
from recon.publish.iceberg import render_value
from tests import mariadb_source as mdb

START = datetime(2026, 3, 1, 0, tzinfo=UTC)
HOURS = 3
TXNS = 90
SNAPSHOT_AFTER = 50  # transactions before the out-of-band snapshot
ALTER_AT = 35

CREATE_ORDERS = (
    "CREATE TABLE orders (id INT PRIMARY KEY, customer VARCHAR(32) CHARACTER SET utf8mb4, "
    "amount DECIMAL(12,2), qty BIGINT UNSIGNED, placed DATETIME, paid_at TIMESTAMP NULL, "
    "doc BLOB)"
)
CREATE_LOG = "CREATE TABLE audit_log (kind VARCHAR(8), n INT)"
FORMATS = ("debezium_json", "dataworks_json", "tencent_dts_pb")


def _workload(conn: Any, rnd: random.Random, n_txns: int, state: dict[str, Any]) -> None:
    """Random transactions; `state` remembers ids so PK changes and re-inserts can happen."""
    live: set[int] = state.setdefault("live", set())
    deleted: set[int] = state.setdefault("deleted", set())
    with conn.cursor() as cur:
        for _ in range(n_txns):
            state["txn"] = state.get("txn", 0) + 1
            if state["txn"] == ALTER_AT:
                cur.execute("ALTER TABLE orders ADD COLUMN note VARCHAR(20)")
                state["has_note"] = True
                continue
            cur.execute("BEGIN")
            for _ in range(rnd.randint(1, 3)):
                r = rnd.random()
                if r < 0.35 or not live:
                    if deleted and rnd.random() < 0.3:
                        rid = rnd.choice(sorted(deleted))  # re-insert a deleted key
                        deleted.discard(rid)
                    else:
                        rid = state["next_id"] = state.get("next_id", 0) + 1
                    cols = {
                        "id": rid,
                        "customer": rnd.choice(["ana", "bo", "émile", "李雷", None]),
                        "amount": Decimal(rnd.randrange(-5000, 10**7)) / 100,
                        "qty": rnd.choice([0, 7, 2**63, 2**64 - 1]),
                        "placed": datetime(2026, 2, 1) + timedelta(seconds=rnd.randrange(10**6)),
                        "paid_at": rnd.choice(
                            [None, datetime(2026, 2, 2) + timedelta(seconds=rnd.randrange(10**6))]
                        ),
                        "doc": bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 6))),
                    }
                    if state.get("has_note"):
                        cols["note"] = rnd.choice(["gift", "rush", None])
                    names = ", ".join(cols)
                    cur.execute(
                        f"INSERT INTO orders ({names}) VALUES ({', '.join(['%s'] * len(cols))})",
                        list(cols.values()),
                    )
                    live.add(rid)
                elif r < 0.6:
                    rid = rnd.choice(sorted(live))
                    if rnd.random() < 0.2:  # primary-key change
                        new = state["next_id"] = state["next_id"] + 1
                        cur.execute("UPDATE orders SET id = %s WHERE id = %s", (new, rid))
                        live.discard(rid)
                        deleted.add(rid)
                        live.add(new)
                    else:
                        extra = ", note = 'upd'" if state.get("has_note") else ""
                        cur.execute(
                            f"UPDATE orders SET amount = amount + 1, paid_at = %s{extra} "
                            "WHERE id = %s",
                            (datetime(2026, 2, 5) + timedelta(minutes=rnd.randrange(999)), rid),
                        )
                elif r < 0.72:
                    rid = rnd.choice(sorted(live))
                    cur.execute("DELETE FROM orders WHERE id = %s", (rid,))
                    live.discard(rid)
                    deleted.add(rid)
                elif r < 0.9:
                    cur.execute(
                        "INSERT INTO audit_log VALUES (%s, %s)",
                        (rnd.choice(["a", "b"]), rnd.randrange(3)),
                    )
                elif r < 0.95:
                    cur.execute(
                        "DELETE FROM audit_log WHERE kind = %s LIMIT 1", (rnd.choice(["a", "b"]),)
                    )
                else:
                    cur.execute(
                        "UPDATE audit_log SET n = n + 10 WHERE kind = %s LIMIT 1",
                        (rnd.choice(["a", "b"]),),
                    )
            cur.execute("COMMIT")


def _snapshot(server: mdb.MariaDB, folder: Path) -> dict[str, Any]:
    """A consistent copy under a global read lock, with the point it was taken at."""
    conn = server.connect("shop")
    try:
        with conn.cursor() as cur:
            cur.execute("FLUSH TABLES WITH READ LOCK")
            cur.execute("SELECT @@gtid_binlog_pos")
            gtid = cur.fetchone()[0]
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
            tables = {}
            for t in ("orders", "audit_log"):
                cur.execute(f"SELECT * FROM {t}")
                tables[t] = ([d[0] for d in cur.description], cur.fetchall())
            cur.execute("UNLOCK TABLES")
    finally:
        conn.close()
    arrow_types = {
        "id": pa.int32(),
        "customer": pa.string(),
        "amount": pa.decimal128(12, 2),
        "qty": pa.decimal128(20, 0),
        "placed": pa.timestamp("us"),
        "paid_at": pa.timestamp("us", tz="UTC"),
        "doc": pa.binary(),
        "note": pa.string(),
        "kind": pa.string(),
        "n": pa.int32(),
    }
    for t, (cols, rows) in tables.items():
        (folder / f"shop.{t}").mkdir(parents=True)
        data = {c: [r[i] for r in rows] for i, c in enumerate(cols)}
        data = {
            c: [v.replace(tzinfo=UTC) if c == "paid_at" and v else v for v in vs]
            for c, vs in data.items()
        }
        table = pa.table(
            {c: pa.array(vs, type=arrow_types[c]) for c, vs in data.items()},
        )
        pq.write_table(table, folder / f"shop.{t}" / "part-00000.parquet")
    seq = int(gtid.split("-")[2])
    wm = {
        "gtid_set": gtid,
        "binlog": {"file": file, "pos": int(pos)},
        "sequence_id": mdb.dataworks_sequence(seq, 999),
        "taken_at": datetime.now(UTC).isoformat(),
    }
    (folder / "_watermark.json").write_text(json.dumps(wm))
    return {"gtid": gtid, "rows": {t: len(r) for t, (_, r) in tables.items()}}


def _source_rows(server: mdb.MariaDB, table: str) -> tuple[list[str], list[dict[str, Any]]]:
    conn = server.connect("shop")
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table}")
            cols = [d[0] for d in cur.description]
            rows = []
            for r in cur.fetchall():
                row = dict(zip(cols, r, strict=True))
                if row.get("paid_at") is not None:
                    row["paid_at"] = row["paid_at"].replace(tzinfo=UTC)  # TIMESTAMP is UTC
                rows.append({c: render_value(v) for c, v in row.items()})
            return cols, rows
    finally:
        conn.close()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("mariadb")
    server = mdb.MariaDB(base / "server").start()
    try:
        conn = server.connect()
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop")
            cur.execute("USE shop")
            cur.execute(CREATE_ORDERS)
            cur.execute(CREATE_LOG)
        rnd = random.Random(20261122)
        state: dict[str, Any] = {}
        _workload(conn, rnd, SNAPSHOT_AFTER, state)
        snap = _snapshot(server, base / "snapshot")
        _workload(conn, rnd, TXNS - SNAPSHOT_AFTER, state)
        conn.close()
        txns = mdb.read_binlog(server)
        types = mdb.column_types(server, "shop")
        final = {t: _source_rows(server, t) for t in ("orders", "audit_log")}
    finally:
        server.stop()
    # the dumper saw the transactions spread evenly over the hours
    span = HOURS * 3600_000
    for i, t in enumerate(txns):
        t.ts_ms = int(START.timestamp() * 1000) + i * span // len(txns) + 1
    encoders = {
        "debezium_json": mdb.encode_debezium,
        "dataworks_json": mdb.encode_dataworks,
        "tencent_dts_pb": mdb.encode_tencent,
    }
    hours = [START + timedelta(hours=i) for i in range(HOURS)]
    for fmt, enc in encoders.items():
        recs = [
            RawRecord(f"mdb_{fmt}", 0, off, key, value, ts)
            for off, (ts, key, value) in enumerate(enc(txns, types))
        ]
        write_dump(base / "raw", f"mdb_{fmt}", recs, "parquet", hours)
    return {"base": base, "txns": txns, "snapshot": snap, "final": final}


def test_the_workload_covers_what_the_test_claims(source: dict[str, Any]) -> None:
    txns = source["txns"]
    changes = [i for t in txns for i in t.items if isinstance(i, mdb.RowChange)]
    ops = Counter((c.table, c.op) for c in changes)
    pk_changes = [
        c
        for c in changes
        if c.op == "update" and c.table == "orders" and c.before["id"] != c.after["id"]  # type: ignore[index]
    ]
    reinserts = Counter(c.after["id"] for c in changes if c.table == "orders" and c.op == "insert")  # type: ignore[index]
    assert pk_changes, "no primary-key change"
    assert (
        ops[("orders", "delete")] and ops[("audit_log", "delete")] and ops[("audit_log", "update")]
    )
    assert any(n > 1 for n in reinserts.values()), "no re-insert of a deleted key"
    assert any(
        isinstance(i, mdb.Ddl) and "ADD COLUMN" in i.sql.upper() for t in txns for i in t.items
    )
    keyless = source["final"]["audit_log"][1]
    assert len(keyless) > len({json.dumps(r, sort_keys=True) for r in keyless}), "no duplicate rows"
    # the snapshot is in the middle: the stream holds changes before and after it
    snap_seq = int(source["snapshot"]["gtid"].split("-")[2])
    assert any(t.seq <= snap_seq and t.items for t in txns)
    assert any(t.seq > snap_seq and t.items for t in txns)


@pytest.mark.parametrize("fmt", FORMATS)
def test_exported_tables_equal_the_source(spark, source: dict[str, Any], fmt: str) -> None:
    base: Path = source["base"]
    tables: dict[str, Any] = {"shop.orders": {}, "shop.audit_log": {}}
    if fmt == "dataworks_json":
        # DataWorks' types are coarse; the table definitions (as first created) give the types,
        # and the column added later is picked up from the images
        tables = {"shop.orders": {"ddl": CREATE_ORDERS}, "shop.audit_log": {"ddl": CREATE_LOG}}
    cfg = {
        "name": f"mdb_{fmt}",
        "format": fmt,
        "raw_path": str(base / "raw"),
        "topics": [f"mdb_{fmt}"],
        "warehouse": str(base / f"wh_{fmt}"),
        "start": START.isoformat(),
        "snapshot": {"path": str(base / "snapshot")},
        "tables": tables,
        "buckets": 8,
    }
    cfg_file = base / f"{fmt}.yaml"
    cfg_file.write_text(yaml.safe_dump(cfg))
    last = (START + timedelta(hours=HOURS - 1)).strftime("%Y-%m-%dT%H")
    assert (
        main(
            [
                "run",
                "--pipeline",
                str(cfg_file),
                "--from",
                START.strftime("%Y-%m-%dT%H"),
                "--to",
                last,
            ]
        )
        == 0
    )
    hours = json.loads(
        (
            base / f"wh_{fmt}" / "_state" / cfg["name"] / "merge" / "hours" / f"hour={last}.json"
        ).read_text()
    )
    assert hours["tables"]["shop.orders"]["schema_version"] >= 1
    skipped = 0
    for h in range(HOURS):
        hour = (START + timedelta(hours=h)).strftime("%Y-%m-%dT%H")
        doc = json.loads(
            (
                base
                / f"wh_{fmt}"
                / "_state"
                / cfg["name"]
                / "merge"
                / "hours"
                / f"hour={hour}.json"
            ).read_text()
        )
        skipped += sum(t["skipped"]["below_snapshot_watermark"] for t in doc["tables"].values())
    assert skipped > 0, "changes from before the snapshot must be skipped, and counted"
    for table in ("orders", "audit_log"):
        out = base / f"{fmt}.{table}.jsonl"
        assert (
            main(
                [
                    "export",
                    "--pipeline",
                    str(cfg_file),
                    "--table",
                    f"shop.{table}",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        got = [json.loads(x) for x in out.read_text().splitlines()]
        cols, want = source["final"][table]
        assert got and set(got[0]) == set(cols), f"{table}: columns {sorted(got[0])} != {cols}"
        key = (
            (lambda r: r["id"]) if table == "orders" else (lambda r: json.dumps(r, sort_keys=True))
        )
        assert sorted(got, key=key) == sorted(want, key=key), f"{fmt}: shop.{table} differs"
