"""Random change streams of a simulated source and what its tables hold after them (the merge's
property tests)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st

from recon.demo.reference_fold import fold
from tests.support.merge import T, event


@st.composite
def change_streams(draw: Any) -> list[dict[str, Any]]:
    """A simulated source: a keyed table (inserts, updates, key changes, deletes, re-inserts)
    and a keyless one (duplicate rows, deleting/updating one copy); one event per change."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    n = draw(st.integers(8, 40))
    keyed: dict[int, str] = {}
    bag: list[tuple[int, str]] = []
    out: list[dict[str, Any]] = []
    for i in range(1, n + 1):
        if rnd.random() < 0.6:
            choice = rnd.random()
            k = rnd.randint(1, 6)
            if k not in keyed:
                keyed[k] = f"v{i}"
                out.append(event(i, "s.a", "insert", None, {"id": k, "v": keyed[k]}, T, ["id"]))
            elif choice < 0.3:
                old = keyed.pop(k)
                out.append(event(i, "s.a", "delete", {"id": k, "v": old}, None, T, ["id"]))
            elif choice < 0.5:
                k2 = rnd.randint(7, 12)
                if k2 in keyed:
                    continue
                old = keyed.pop(k)
                keyed[k2] = old + "m"
                out.append(
                    event(
                        i,
                        "s.a",
                        "update",
                        {"id": k, "v": old},
                        {"id": k2, "v": keyed[k2]},
                        T,
                        ["id"],
                    )
                )
            else:
                old = keyed[k]
                keyed[k] = f"u{i}"
                out.append(
                    event(
                        i, "s.a", "update", {"id": k, "v": old}, {"id": k, "v": keyed[k]}, T, ["id"]
                    )
                )
        else:
            if bag and rnd.random() < 0.4:
                row = bag.pop(rnd.randrange(len(bag)))
                if rnd.random() < 0.5:
                    out.append(event(i, "s.b", "delete", {"id": row[0], "v": row[1]}, None, T))
                else:
                    new = (row[0], f"w{rnd.randint(1, 2)}")
                    bag.append(new)
                    out.append(
                        event(
                            i,
                            "s.b",
                            "update",
                            {"id": row[0], "v": row[1]},
                            {"id": new[0], "v": new[1]},
                            T,
                        )
                    )
            else:
                row = (rnd.randint(1, 2), f"w{rnd.randint(1, 2)}")
                bag.append(row)
                out.append(event(i, "s.b", "insert", None, {"id": row[0], "v": row[1]}, T))
    return out


def split_hours(events: list[dict[str, Any]], cuts: list[int]) -> list[list[dict[str, Any]]]:
    """`events` cut into hours at `cuts` (each taken modulo the stream's length)."""
    bounds = [0, *sorted(set(c % (len(events) + 1) for c in cuts)), len(events)]
    return [events[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def oracle(events: list[dict[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of s.a (keyed) and s.b (a multiset) after `events`, sorted."""
    out: dict[str, list[tuple[Any, ...]]] = {"s.a": [], "s.b": []}
    state = fold(events)
    for table, rows in state.items():
        if table == "s.b":
            # multiset: the fold keeps one image per distinct row; count copies from the events
            counts: dict[tuple[Any, ...], int] = {}
            for ev in events:
                if ev["tbl"] != "b":
                    continue
                if ev["before"] is not None:
                    k = tuple(sorted(ev["before"]))
                    counts[k] = counts.get(k, 0) - 1
                if ev["after"] is not None:
                    k = tuple(sorted(ev["after"]))
                    counts[k] = counts.get(k, 0) + 1
            out[table] = sorted(k for k, c in counts.items() for _ in range(c))
        else:
            out[table] = sorted(tuple(sorted(r.items())) for _, r in rows.values() if r)
    return out
