"""History against a real MariaDB: the shop workload (primary-key changes, deletes and
re-inserts, an ADD COLUMN, BIGINT UNSIGNED, DECIMAL, times, BLOBs) on a throwaway server, the
table's rows read after every transaction; its binlog encoded as Debezium JSON over three
hours; `recon run` with `history: true` on `shop.orders`. Then `recon export --as-of-time` at
the commit time of every transaction, and at every hour's end, must equal the table as the
database held it then; and `recon trace` of a sample of keys must find every change of each,
with the offset, dump file and bytes of the record it came from."""

from __future__ import annotations

import base64
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from recon.cli import main
from recon.core.model import RawRecord
from recon.demo.demo import write_dump
from recon.publish.export import render_value
from tests.support import mariadb_source as mdb
from tests.support.builders import write_pipeline
from tests.support.mariadb_workload import START, create_shop, shop_workload

HOURS = 3
TXNS = 60
FMT = "debezium_json"


def _orders(server: mdb.MariaDB) -> list[dict[str, Any]]:
    conn = server.connect("shop")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT * FROM orders")
            cols = [d[0] for d in cur.description]
            rows = []
            for r in cur.fetchall():
                row = dict(zip(cols, r, strict=True))
                if row.get("paid_at") is not None:
                    row["paid_at"] = row["paid_at"].replace(tzinfo=UTC)  # TIMESTAMP is UTC
                rows.append({c: render_value(v) for c, v in row.items()})
            return sorted(rows, key=lambda r: r["id"])
    finally:
        conn.close()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The workload, the table after every transaction (by GTID sequence number), and the
    dump: the transactions spread evenly over the hours, each a millisecond apart at least."""
    base = tmp_path_factory.mktemp("history")
    server = mdb.MariaDB(base / "server").start()
    try:
        conn = server.connect()
        with conn.cursor() as cur:
            create_shop(cur)
        rnd = random.Random(20261207)
        state: dict[str, Any] = {}
        after: dict[int, list[dict[str, Any]]] = {}
        for _ in range(TXNS):
            shop_workload(conn, rnd, 1, state)
            after[mdb.gtid_seq(server)] = _orders(server)
        conn.close()
        txns = [t for t in mdb.read_binlog(server) if any(i.db == "shop" for i in t.items)]
        types = mdb.column_types(server, "shop")
    finally:
        server.stop()
    span = HOURS * 3600_000
    for i, t in enumerate(txns):
        t.ts_ms = int(START.timestamp() * 1000) + i * span // len(txns) + 1
    recs = [
        RawRecord("hist", 0, off, key, value, ts)
        for off, (ts, key, value) in enumerate(mdb.encode_debezium(txns, types))
    ]
    write_dump(
        base / "raw", "hist", recs, "parquet", [START + timedelta(hours=i) for i in range(HOURS)]
    )
    return {"base": base, "txns": txns, "after": after, "records": recs}


def _as_of(cfg_file: Path, at: datetime, out: Path) -> list[dict[str, Any]]:
    text = at.strftime("%Y-%m-%dT%H:%M:%S.%f")
    args = ["export", "--pipeline", str(cfg_file), "--table", "shop.orders", "--out", str(out)]
    assert main([*args, "--as-of-time", text]) == 0
    return sorted((json.loads(x) for x in out.read_text().splitlines()), key=lambda r: r["id"])


@pytest.fixture(scope="module")
def cfg_file(spark, source: dict[str, Any]) -> Path:
    """The pipeline, `history: true` on `shop.orders`, its three hours run by `recon run`."""
    base: Path = source["base"]
    cfg = write_pipeline(
        base / "p.yaml",
        name="hist",
        format=FMT,
        raw=base / "raw",
        warehouse=base / "wh",
        start=START,
        tables={"shop.orders": {"history": True}, "shop.audit_log": {}},
        buckets=4,
    )
    last = (START + timedelta(hours=HOURS - 1)).strftime("%Y-%m-%dT%H")
    run = ["run", "--pipeline", str(cfg), "--from", START.strftime("%Y-%m-%dT%H")]
    assert main([*run, "--to", last]) == 0
    return cfg


def test_the_history_as_of_every_transaction_and_hour_end_equals_the_database(
    source: dict[str, Any], cfg_file: Path
) -> None:
    base: Path = source["base"]
    after: dict[int, list[dict[str, Any]]] = source["after"]
    seqs = sorted(after)
    checked = 0
    for t in source["txns"]:
        if t.seq not in after:  # the database's CREATE statements: before the table's rows
            continue
        at = datetime.fromtimestamp(t.ts_ms / 1000, UTC)
        assert _as_of(cfg_file, at, base / "at.jsonl") == after[t.seq], f"as of txn {t.seq}"
        checked += 1
    assert checked == len(seqs)
    for h in range(HOURS):  # the end of each hour: the last transaction before it
        end = START + timedelta(hours=h + 1) - timedelta(microseconds=1)
        done = [t.seq for t in source["txns"] if t.ts_ms <= end.timestamp() * 1000]
        want = after[max(s for s in done if s in after)]
        assert _as_of(cfg_file, end, base / "end.jsonl") == want, f"at the end of hour {h}"
    first = datetime.fromtimestamp(source["txns"][0].ts_ms / 1000, UTC) - timedelta(seconds=1)
    assert _as_of(cfg_file, first, base / "before.jsonl") == []


def _changes_of(records: list[RawRecord]) -> dict[int, list[tuple[str, int]]]:
    """Per id of `shop.orders`, its changes as the dump holds them: (op, offset), where a
    primary-key change is the old key's `pk_change` and the new key's `update`."""
    out: dict[int, list[tuple[str, int]]] = {}
    for r in records:
        payload = json.loads(r.value)["payload"] if r.value else {}
        if payload.get("source", {}).get("table") != "orders":
            continue
        before, after = payload.get("before"), payload.get("after")
        op = {"c": "insert", "u": "update", "d": "delete"}[payload["op"]]
        if after is not None:
            out.setdefault(after["id"], []).append((op, r.offset))
        if before is not None and (after is None or after["id"] != before["id"]):
            out.setdefault(before["id"], []).append(
                ("delete" if after is None else "pk_change", r.offset)
            )
    return out


def test_trace_finds_every_change_of_a_key_with_its_record(
    source: dict[str, Any], cfg_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records: list[RawRecord] = source["records"]
    by_offset = {r.offset: r for r in records}
    changes = _changes_of(records)
    moved = [k for k, cs in changes.items() if any(op == "pk_change" for op, _ in cs)]
    busy = sorted(changes, key=lambda k: -len(changes[k]))
    sample = sorted({*moved[:2], *busy[:3], *random.Random(7).sample(sorted(changes), 3)})
    assert len(sample) >= 5
    for k in sample:
        capsys.readouterr()
        args = ["trace", "--pipeline", str(cfg_file), "--table", "shop.orders"]
        assert main([*args, "--key", str(k), "--raw"]) == 0
        got = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        assert [(c["op"], c["source"]["offset"]) for c in got] == changes[k], f"key {k}"
        for c in got:
            rec = by_offset[c["source"]["offset"]]
            assert c["record"]["file"].endswith(".parquet")
            assert base64.b64decode(c["record"]["value_base64"]) == rec.value
            assert c["decoded"]["op"] in ("insert", "update", "delete")
            img = (
                c["decoded"]["after"] if c["op"] in ("insert", "update") else c["decoded"]["before"]
            )
            assert img["id"] == str(k) or c["op"] == "pk_change"
            assert c["published"]["snapshot_id"] is not None
        assert main([*args, "--key", str(k), "--as-of-hour", START.strftime("%Y-%m-%dT%H")]) == 0
        first = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        assert [c["source"]["offset"] for c in first] == [
            c["source"]["offset"]
            for c in got
            if c["published"]["hour"] == START.strftime("%Y-%m-%dT%H")
        ]
