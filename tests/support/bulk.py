"""Large sample workloads in linear time (the demo's `sample.workload` picks keys by sorting the
live set, fine for dozens of transactions, not for hundreds of thousands): inserts, updates and
deletes of random keys, encoded by the same sample encoders as the demo."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from decimal import Decimal

from recon.demo.sample import Change, Txn


def bulk_workload(
    start: datetime, changes: int, keys: int, per_txn: int = 2, seed: int = 1, span_s: int = 3500
) -> list[Txn]:
    """`changes` row changes on shop.orders over `span_s` seconds from `start`: a change to a
    key not live inserts it; a live one is updated (85%) or deleted."""
    rnd = random.Random(seed)
    live: dict[int, dict] = {}
    txns: list[Txn] = []
    base_ms = int(start.timestamp() * 1000)
    n_txns = max(1, changes // per_txn)
    pos = 4
    for t in range(n_txns):
        ts = base_ms + t * span_s * 1000 // n_txns
        txn = Txn(gtid_no=t + 1, file=f"mysql-bin.{1 + t // 5000:06d}", pos=pos, ts_ms=ts)
        pos = 4 if (t + 1) % 5000 == 0 else pos + 300
        now = (datetime(2026, 11, 20) + timedelta(milliseconds=ts - base_ms)).replace(microsecond=0)
        for row in range(per_txn):
            txn.changes.append(_change(rnd, live, rnd.randrange(1, keys + 1), now, row))
        txns.append(txn)
    return txns


def _change(rnd: random.Random, live: dict[int, dict], key: int, now: datetime, row: int) -> Change:
    old = live.get(key)
    if old is None:
        new = {
            "id": key,
            "customer": rnd.choice(["ana", "bo", "chen", "dev", "émile"]),
            "amount": Decimal(rnd.randrange(100, 100000)) / 100,
            "status": "new",
            "updated_at": now,
            "note": bytes([rnd.randrange(256) for _ in range(4)]),
        }
        live[key] = new
        return Change("insert", None, dict(new), row)
    if rnd.random() < 0.85:
        new = dict(
            old,
            status=rnd.choice(["paid", "shipped", "done"]),
            amount=old["amount"] + 1,
            updated_at=now,
        )
        live[key] = new
        return Change("update", dict(old), dict(new), row)
    del live[key]
    return Change("delete", dict(old), None, row)
