"""The shop workload the MariaDB tests run on a throwaway server: random transactions over
`orders` (primary-key changes, deletes and re-inserts, BIGINT UNSIGNED, DECIMAL, DATETIME,
TIMESTAMP, BLOB, non-ASCII text, an ADD COLUMN) and `audit_log` (no primary key, duplicates),
and a consistent snapshot with its GTID point."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tests.support import mariadb_source as mdb

START = datetime(2026, 3, 1, 0, tzinfo=UTC)
ALTER_AT = 35

CREATE_ORDERS = (
    "CREATE TABLE orders (id INT PRIMARY KEY, customer VARCHAR(32) CHARACTER SET utf8mb4, "
    "amount DECIMAL(12,2), qty BIGINT UNSIGNED, placed DATETIME, paid_at TIMESTAMP NULL, "
    "doc BLOB)"
)
CREATE_LOG = "CREATE TABLE audit_log (kind VARCHAR(8), n INT)"


def shop_workload(conn: Any, rnd: random.Random, n_txns: int, state: dict[str, Any]) -> None:
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


def shop_snapshot(server: mdb.MariaDB, folder: Path) -> dict[str, Any]:
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


def create_shop(cur: Any) -> None:
    """The `shop` database with `orders` and `audit_log`, selected for the cursor."""
    cur.execute("CREATE DATABASE shop")
    cur.execute("USE shop")
    cur.execute(CREATE_ORDERS)
    cur.execute(CREATE_LOG)
