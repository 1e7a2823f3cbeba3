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
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest

from recon.cli import main
from recon.core.model import RawRecord
from recon.demo.demo import write_dump
from recon.publish.export import render_value
from tests.support import mariadb_source as mdb
from tests.support.builders import write_pipeline
from tests.support.mariadb_workload import (
    CREATE_LOG,
    CREATE_ORDERS,
    START,
    create_shop,
    shop_snapshot,
    shop_workload,
)

HOURS = 3
TXNS = 90
SNAPSHOT_AFTER = 50  # transactions before the out-of-band snapshot
FORMATS = ("debezium_json", "dataworks_json", "tencent_dts_pb")


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
            create_shop(cur)
        rnd = random.Random(20261122)
        state: dict[str, Any] = {}
        shop_workload(conn, rnd, SNAPSHOT_AFTER, state)
        snap = shop_snapshot(server, base / "snapshot")
        shop_workload(conn, rnd, TXNS - SNAPSHOT_AFTER, state)
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
    cfg_file = write_pipeline(
        base / f"{fmt}.yaml",
        name=f"mdb_{fmt}",
        format=fmt,
        raw=base / "raw",
        warehouse=base / f"wh_{fmt}",
        start=START,
        snapshot={"path": str(base / "snapshot")},
        tables=tables,
        buckets=8,
    )
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
            base / f"wh_{fmt}" / "_state" / f"mdb_{fmt}" / "merge" / "hours" / f"hour={last}.json"
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
                / f"mdb_{fmt}"
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
