"""The conservation identity of an hour as a picture of its flow, for the report's HTML: the
records read, what became of them (duplicates, quarantined, carried to the next hour, consumed),
the events the consumed records made, the events merged, and each table. Boxes and arrows with
the numbers on them, positions computed here; `report_body.html` draws them as SVG (no
scripts: the UI shows reports in a sandboxed iframe). A box of a link that does not balance is
red."""

from __future__ import annotations

from typing import Any

BOX_W, BOX_H, COL_W, ROW_H, PAD = 146, 44, 166, 58, 8


def _box(col: int, row: int, label: str, value: str, bad: bool = False) -> dict[str, Any]:
    return {
        "x": PAD + col * COL_W,
        "y": PAD + row * ROW_H,
        "w": BOX_W,
        "h": BOX_H,
        "label": label,
        "value": value,
        "bad": bad,
    }


def _edge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, int]:
    return {
        "x1": a["x"] + a["w"],
        "y1": a["y"] + a["h"] // 2,
        "x2": b["x"] - 4,
        "y2": b["y"] + b["h"] // 2,
    }


def flow(identity: dict[str, Any], tables: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Boxes, arrows and the picture's size for one hour's identity and tables."""
    rec, disp, ev = identity["records"], identity["dispositions"], identity["events"]
    rec_bad, disp_bad, ev_bad = (not rec["balanced"], not disp["balanced"], not ev["balanced"])
    dups = rec["duplicates_in_hour"] + rec["duplicates_of_earlier_hours"]
    read = _box(0, 1, "records read", f"{rec['read']}", rec_bad)
    dup = _box(1, 0, "duplicates", f"{dups}", rec_bad)
    distinct = _box(1, 1, "distinct", f"{rec['distinct']}", rec_bad)
    carried_in = _box(1, 2, "carried in", f"{disp['carried_in']}", disp_bad)
    quarantined = _box(2, 0, "quarantined", f"{disp['quarantined']}", disp_bad)
    carried_out = _box(2, 1, "carried out", f"{disp['carried_out']}", disp_bad)
    control = sum(disp.get("control", {}).values())
    consumed = _box(
        2, 2, "consumed", f"{disp['consumed']}" + (f" ({control} control)" if control else ""),
        disp_bad,
    )  # fmt: skip
    decoded = _box(3, 2, "events decoded", f"{ev['decoded']}", ev_bad)
    merged = _box(4, 2, "events merged", f"{ev['merged']}", ev_bad)
    boxes = [read, dup, distinct, carried_in, quarantined, carried_out, consumed, decoded, merged]
    edges = [
        _edge(read, dup), _edge(read, distinct), _edge(distinct, quarantined),
        _edge(distinct, carried_out), _edge(distinct, consumed), _edge(carried_in, consumed),
        _edge(consumed, decoded), _edge(decoded, merged),
    ]  # fmt: skip
    aside = sum(ev.get("not_merged", {}).values()) + sum(ev.get("not_configured", {}).values())
    if aside:
        boxes.append(_box(4, 3, "not merged / not configured", f"{aside}", ev_bad))
    balanced = identity.get("tables", {})
    for i, (name, t) in enumerate(sorted(tables.items())):
        box = _box(
            5,
            i,
            name,
            f"{t['applied']} applied, {t['rows_after']} rows",
            not balanced.get(name, True),
        )
        boxes.append(box)
        edges.append(_edge(merged, box))
    rows = max(4 if aside else 3, len(tables))
    return {
        "boxes": boxes,
        "edges": edges,
        "width": PAD * 2 + 5 * COL_W + BOX_W,
        "height": PAD * 2 + rows * ROW_H,
    }
