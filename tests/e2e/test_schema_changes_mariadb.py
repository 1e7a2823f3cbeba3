"""Mid-stream schema changes, as the database applies them, in all six formats (issue 16).

A random workload on a real MariaDB over three hours, with ALTER TABLEs in the middle of an hour
and at hour boundaries: ADD COLUMN nullable, NOT NULL with a DEFAULT and without one (the implicit
default), on a table with a key and on one without; a widening MODIFY; RENAME COLUMN twice; a
DROP COLUMN. The binlog is read back and encoded in each format; `recon run` publishes the three
hours, and the table's version of every hour (Iceberg time travel, read with pyiceberg) must equal
`SELECT *` at the end of that hour. The hours run a second time must give the same tables. For
Debezium, `shop.items` keeps a history (`history: true`): the table as of every hour's end,
read from it (`recon export --as-of-time`), must equal the database then, in the table's current
columns (renamed columns by their new names, the dropped one left out, defaults filled).
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from recon.cli import main
from recon.config import load_config
from recon.core.model import RawRecord
from recon.demo.demo import write_dump
from recon.publish.export import export_as_of_time
from recon.publish.iceberg import load_table, snapshot_at_hour
from tests.support import mariadb_source as mdb
from tests.support.builders import write_pipeline
from tests.support.mariadb_formats import encode_canal_json, encode_canal_pb, encode_tdsql

START = datetime(2026, 5, 1, 0, tzinfo=UTC)
HOURS = 3
TXNS_PER_HOUR = 24
CREATE_ITEMS = (
    "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20), qty BIGINT UNSIGNED, "
    "price DECIMAL(8,2), n INT)"
)
CREATE_LOG = "CREATE TABLE log (kind VARCHAR(8), v INT)"
# (hour, transaction index in the hour) -> DDL run there; index 0 = at the hour boundary
DDL = {
    (0, 8): "ALTER TABLE items ADD COLUMN note VARCHAR(10)",
    (0, 12): "ALTER TABLE items ADD COLUMN flag INT NOT NULL DEFAULT 7",
    (0, 16): "ALTER TABLE log ADD COLUMN lvl INT NOT NULL DEFAULT 1",
    (1, 0): "ALTER TABLE items ADD COLUMN code VARCHAR(8) NOT NULL, ADD COLUMN cnt INT NOT NULL",
    (1, 9): "ALTER TABLE items MODIFY n BIGINT",
    (1, 14): "ALTER TABLE items RENAME COLUMN name TO title",
    (2, 0): "ALTER TABLE items RENAME COLUMN note TO remark",
    (2, 10): "ALTER TABLE items DROP COLUMN cnt",
}
FORMATS = (
    "tencent_dts_pb",
    "tdsql_json",
    "canal_pb",
    "canal_json",
    "debezium_json",
    "dataworks_json",
)


NOT_NULL = ("flag", "code", "cnt")

# run the hours a second time for the formats whose columns come from DDL alone or whose
# schema-change messages are their own records (the others share the same merge path)
RERUN = ("tdsql_json", "debezium_json", "dataworks_json")
HISTORY = ("debezium_json",)
RENAMED = {"name": "title", "note": "remark"}
DROPPED = ("cnt",)


def _value(rnd: random.Random, col: str, col_type: str) -> Any:
    base = col_type.split("(")[0].split()[0]
    if base == "varchar":
        return rnd.choice(["a", "bé", "x'y", ""] + ([] if col in NOT_NULL else [None]))
    if base == "decimal":
        return Decimal(rnd.randrange(-9999, 99999)) / 100
    if "unsigned" in col_type:
        return rnd.choice([0, 5, 2**63, 2**64 - 1])
    return rnd.randrange(-50, 50)


def _change(cur: Any, rnd: random.Random, types: dict[str, dict[str, str]], live: set[int]) -> None:
    items = {c: t for c, t in types["items"].items() if c != "id"}
    r = rnd.random()
    if r < 0.4 or len(live) < 3:
        rid = max(live | {0}) + 1 + rnd.randrange(2)
        row = {"id": rid, **{c: _value(rnd, c, t) for c, t in items.items()}}
        cur.execute(
            f"INSERT INTO items ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))})",
            list(row.values()),
        )
        live.add(rid)
    elif r < 0.65:
        col = rnd.choice(sorted(items))
        v = _value(rnd, col, items[col])
        cur.execute(f"UPDATE items SET {col} = %s WHERE id = %s", (v, rnd.choice(sorted(live))))
    elif r < 0.75:
        rid = rnd.choice(sorted(live))
        cur.execute("DELETE FROM items WHERE id = %s", (rid,))
        live.discard(rid)
    elif r < 0.9:
        cur.execute(
            "INSERT INTO log (kind, v) VALUES (%s, %s)", (rnd.choice("ab"), rnd.randrange(3))
        )
    else:
        cur.execute("DELETE FROM log WHERE kind = %s LIMIT 1", (rnd.choice("ab"),))


def _rows(server: mdb.MariaDB, table: str) -> list[dict[str, Any]]:
    conn = server.connect("shop")
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table}")
            cols = [d[0] for d in cur.description]
            return [_plain(dict(zip(cols, r, strict=True))) for r in cur.fetchall()]
    finally:
        conn.close()


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {
        c: (str(v) if isinstance(v, (Decimal, int)) and not isinstance(v, bool) else v)
        for c, v in row.items()
    }


def _workload(server: mdb.MariaDB) -> dict[str, Any]:
    """Runs the hours; returns the rows at the end of each hour, the last GTID of each hour
    and the column types in force after each transaction that changed them."""
    rnd = random.Random(20261123)
    conn = server.connect()
    live: set[int] = set()
    hour_end: list[int] = []
    states: list[dict[str, list[dict[str, Any]]]] = []
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE shop")
        cur.execute("USE shop")
        cur.execute(CREATE_ITEMS)
        cur.execute(CREATE_LOG)
        schema_at = [(0, mdb.column_types(server, "shop"))]
        for h in range(HOURS):
            for i in range(TXNS_PER_HOUR):
                if (h, i) in DDL:
                    cur.execute(DDL[(h, i)])
                    schema_at.append((mdb.gtid_seq(server), mdb.column_types(server, "shop")))
                    continue
                cur.execute("BEGIN")
                for _ in range(rnd.randint(1, 3)):
                    _change(cur, rnd, schema_at[-1][1], live)
                cur.execute("COMMIT")
            hour_end.append(mdb.gtid_seq(server))
            states.append({t: _rows(server, t) for t in ("items", "log")})
    conn.close()
    return {"hour_end": hour_end, "states": states, "schema_at": schema_at}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("schema_changes")
    server = mdb.MariaDB(base / "server").start()
    try:
        run = _workload(server)
        txns = mdb.read_binlog(server)
    finally:
        server.stop()
    txns = [t for t in txns if any(i.db == "shop" for i in t.items)]
    # each transaction's time falls in its hour; the first ones (CREATE TABLE) in hour 0
    for h, last in enumerate(run["hour_end"]):
        mine = [t for t in txns if (run["hour_end"][h - 1] if h else 0) < t.seq <= last]
        for i, t in enumerate(mine):
            t.ts_ms = (
                int((START + timedelta(hours=h)).timestamp() * 1000)
                + (i + 1) * 3_000_000 // (len(mine) + 1)
                + 600_000
            )

    def types_at(t: mdb.BinlogTxn) -> dict[str, dict[str, str]]:
        # the types in force when the transaction ran (a DDL's own txn: after it)
        return [ty for seq, ty in run["schema_at"] if seq <= t.seq][-1]

    encoders = {
        "tencent_dts_pb": mdb.encode_tencent,
        "tdsql_json": encode_tdsql,
        "canal_pb": encode_canal_pb,
        "canal_json": encode_canal_json,
        "debezium_json": mdb.encode_debezium,
        "dataworks_json": mdb.encode_dataworks,
    }
    hours = [START + timedelta(hours=i) for i in range(HOURS)]
    for fmt, enc in encoders.items():
        recs = [
            RawRecord(f"sc_{fmt}", 0, off, key, value, ts)
            for off, (ts, key, value) in enumerate(enc(txns, types_at))
        ]
        write_dump(base / "raw", f"sc_{fmt}", recs, "parquet", hours)
    return {"base": base, "run": run, "txns": txns}


def _published(cfg_file: Path, table: str, hour: datetime) -> list[dict[str, Any]]:
    cfg = load_config(cfg_file)
    t = load_table(cfg, f"shop.{table}")
    snap = snapshot_at_hour(cfg, f"shop.{table}", t, hour.strftime("%Y-%m-%dT%H"))
    data = t.scan(snapshot_id=snap).to_arrow()
    data = data.drop_columns([c for c in data.column_names if c.startswith("_cdc_")])
    return [_plain(r) for r in data.to_pylist()]


def _key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def test_the_workload_changes_the_schema_as_the_test_claims(source: dict[str, Any]) -> None:
    ddl = [i.sql for t in source["txns"] for i in t.items if isinstance(i, mdb.Ddl)]
    assert sum("ALTER" in d for d in ddl) == len(DDL)
    states = source["run"]["states"]
    assert set(states[-1]["items"][0]) == {
        "id", "title", "qty", "price", "n", "remark", "flag", "code"
    }  # fmt: skip
    assert set(states[1]["items"][0]) >= {"title", "note", "cnt"}
    assert set(states[0]["items"][0]) >= {"name", "note", "flag"}
    # rows from before each ADD read its default, in the database
    assert any(r["flag"] == "7" for r in states[0]["items"])
    assert any(r["cnt"] == "0" and r["code"] == "" for r in states[1]["items"])
    assert any(r["lvl"] == "1" for r in states[0]["log"])
    assert len(states[-1]["log"]) > len({_key(r) for r in states[-1]["log"]}), "no duplicate rows"


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_hour_equals_the_database(spark, source: dict[str, Any], fmt: str) -> None:
    base: Path = source["base"]
    tables: dict[str, Any] = {"shop.items": {}, "shop.log": {}}
    if fmt == "dataworks_json":  # coarse types: the definitions as first created give them
        tables = {"shop.items": {"ddl": CREATE_ITEMS}, "shop.log": {"ddl": CREATE_LOG}}
    if fmt in HISTORY:
        tables["shop.items"]["history"] = True
    cfg_file = write_pipeline(
        base / f"{fmt}.yaml",
        name=f"sc_{fmt}",
        format=fmt,
        raw=base / "raw",
        warehouse=base / f"wh_{fmt}",
        start=START,
        tables=tables,
        buckets=4,
    )
    last = (START + timedelta(hours=HOURS - 1)).strftime("%Y-%m-%dT%H")
    args = ["run", "--pipeline", str(cfg_file), "--from", START.strftime("%Y-%m-%dT%H")]
    assert main([*args, "--to", last]) == 0, f"{fmt}: recon run failed"
    states = source["run"]["states"]
    for h in range(HOURS):
        for table in ("items", "log"):
            got = _published(cfg_file, table, START + timedelta(hours=h))
            want = states[h][table]
            assert sorted(got, key=_key) == sorted(want, key=_key), (
                f"{fmt}: shop.{table} at the end of hour {h} differs"
            )
    if fmt in HISTORY:
        _check_history(cfg_file, states)
    if fmt not in RERUN:
        return
    # the hours run again (a backfill over them): the same tables, nothing applied twice
    assert main([*args, "--to", last]) == 0, f"{fmt}: recon run failed when run again"
    for table in ("items", "log"):
        got = _published(cfg_file, table, START + timedelta(hours=HOURS - 1))
        want = states[-1][table]
        assert sorted(got, key=_key) == sorted(want, key=_key), f"{fmt}: shop.{table} run again"


def _check_history(cfg_file: Path, states: list[dict[str, list[dict[str, Any]]]]) -> None:
    """`shop.items` as of every hour's end, from its history, against the database then."""
    cfg = load_config(cfg_file)
    for h in range(HOURS):
        at = START + timedelta(hours=h + 1)
        got = [_plain(r) for r in export_as_of_time(cfg, "shop.items", at)]
        want = [
            {RENAMED.get(c, c): v for c, v in r.items() if c not in DROPPED}
            for r in states[h]["items"]
        ]
        assert sorted(got, key=_key) == sorted(want, key=_key), (
            f"{cfg.name}: shop.items as of the end of hour {h}, from its history"
        )
