"""Reference fold of canonical events into table rows (pure Python, in memory).

The merge rules of contract 5.1 in their simplest form: per primary key the change with the
highest order key wins; a delete leaves a tombstone; an update whose key changed removes the old
key. Used to check decoders against expected table states and as the oracle the Spark merge is
tested against. Tables without a primary key are keyed by the whole row (a multiset).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Row = dict[str, str | None]
KeyT = tuple[Any, ...]


def _key(pk: list[str], img: Row) -> KeyT:
    if pk:
        return tuple(img.get(c) for c in pk)
    return tuple(sorted(img.items()))


def fold(
    events: Iterable[dict[str, Any]], table_of: Any = None
) -> dict[str, dict[KeyT, tuple[bytes, Row | None]]]:
    """events: rows of the event schema (maps as dicts or (k, v) lists). Returns
    table -> key -> (order_key, row or None for a tombstone)."""
    state: dict[str, dict[KeyT, tuple[bytes, Row | None]]] = {}
    counts: dict[str, dict[KeyT, int]] = {}
    for ev in sorted(events, key=lambda e: e["order_key"]):
        if ev["op"] == "ddl":
            continue
        table = table_of(ev) if table_of else f"{ev['db']}.{ev['tbl']}"
        before = _as_dict(ev.get("before"))
        after = _as_dict(ev.get("after"))
        pk = list(ev.get("pk") or [])
        rows = state.setdefault(table, {})
        ok = ev["order_key"]
        if not pk:
            mult = counts.setdefault(table, {})
            if before is not None and ev["op"] in ("update", "delete"):
                k = _key(pk, before)
                if mult.get(k, 0) > 0:
                    mult[k] -= 1
                    if mult[k] == 0:
                        rows[k] = (ok, None)
            if after is not None:
                k = _key(pk, after)
                mult[k] = mult.get(k, 0) + 1
                rows[k] = (ok, after)
            continue
        # a before image without all key columns (Paimon's partial `before`) cannot move the key
        if before is not None and ev["op"] in ("update", "delete") and all(c in before for c in pk):
            old_key = _key(pk, before)
            if ev["op"] == "delete" or (after is not None and _key(pk, after) != old_key):
                cur = rows.get(old_key)
                if cur is None or cur[0] <= ok:
                    rows[old_key] = (ok, None)
        if after is not None:
            k = _key(pk, after)
            cur = rows.get(k)
            if cur is None or cur[0] <= ok:
                base = dict(cur[1]) if cur and cur[1] is not None else {}
                base.update(after)
                rows[k] = (ok, base)
    return state


def _as_dict(m: Any) -> Row | None:
    """Maps arrive as dicts or as Arrow's list of (key, value) pairs."""
    return None if m is None else dict(m)


def table_rows(state: dict[str, dict[KeyT, tuple[bytes, Row | None]]]) -> dict[str, list[Row]]:
    """Live rows per table, in key order (multiset rows repeated by multiplicity)."""
    out: dict[str, list[Row]] = {}
    for table, rows in state.items():
        live = [r for _, (_, r) in sorted(rows.items(), key=lambda kv: _sort_key(kv[0])) if r]
        out[table] = live
    return out


def _sort_key(k: KeyT) -> tuple[Any, ...]:
    return tuple(
        (0, int(x)) if isinstance(x, str) and x.lstrip("-").isdigit() else (1, str(x)) for x in k
    )
