"""The shapes of an hour's events: what the merge must know of them before it reads them again
(`recon.merge.schemas.HourSummary`): the events per source table and op, each DDL statement,
and each distinct shape of the row images (their columns, types, key and defaults as sent).

Each decode task counts them as it writes its output (`TaskSummary`), beside its counters,
the reasons of its quarantine and the newest source time per table, into a small summary
file: the decode adds up the tasks' summaries (`summary_rows`) instead of reading its own
output back with Spark. The decode keeps the shapes with its counters, with the events
folder's files they were counted from; the merge takes them from there instead of reading the
hour's events once more (a Spark job, a tenth of a small hour's merge), and counts them itself
(`shape_keys`, `with_shape_texts`) for an hour decoded before, or whose events are no longer
the ones counted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any, NotRequired, TypedDict

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

SHAPE_FIELDS = ("ddl", "at", "cols", "types", "pk", "defaults")
"""The text that tells an event's shape apart (Spark's JSON of each part; `at`: the hex of a
DDL statement's order key, which sorts as the key does)."""


_KEY = "_shape_"
"""The prefix of the grouping form of each `SHAPE_FIELDS` column (`shape_keys`)."""


def shape_keys(among: Column | None = None) -> list[Column]:
    """What tells an event's shape apart, in a form to group by: the image's column names and
    the key as arrays, the types and defaults as their maps' entries (Spark cannot group by a
    map), a DDL's statement and order key (null for rows outside `among`). `with_shape_texts` turns
    an aggregate's groups into the `SHAPE_FIELDS` texts: Spark's JSON is then written once per
    group, not once per event for each of four parts (the decode's count of a 500k-event hour:
    1.72 -> 0.96 s in a fresh JVM, the same texts)."""
    is_ddl = F.col("op") == "ddl"
    not_ddl = F.col("op") != "ddl"
    if among is not None:
        is_ddl, not_ddl = among & is_ddl, among & not_ddl
    parts = {
        "ddl": (is_ddl, F.col("ddl")),
        "at": (is_ddl, F.col("order_key")),
        "cols": (not_ddl, F.map_keys(F.coalesce("after", "before"))),
        "types": (not_ddl, F.map_entries("types")),
        "pk": (not_ddl, F.col("pk")),
        "defaults": (not_ddl, F.map_entries("defaults")),
    }
    return [F.when(cond, value).alias(_KEY + name) for name, (cond, value) in parts.items()]


def with_shape_texts(groups: DataFrame) -> DataFrame:
    """An aggregate grouped by `shape_keys`, with the `SHAPE_FIELDS` texts in their place (each
    part as Spark's JSON of it, as the decode counted it per event before; `at`: the hex of a
    DDL's order key)."""
    texts = {
        "ddl": F.col(_KEY + "ddl"),
        "at": F.hex(_KEY + "at"),
        "cols": F.to_json(_KEY + "cols"),
        "types": F.to_json(F.map_from_entries(_KEY + "types")),
        "pk": F.to_json(_KEY + "pk"),
        "defaults": F.to_json(F.map_from_entries(_KEY + "defaults")),
    }
    kept = [c for c in groups.columns if not c.startswith(_KEY)]
    return groups.select(*kept, *[texts[f].alias(f) for f in SHAPE_FIELDS])


class EventShape(TypedDict):
    """Events of one source table, op and shape, and how many."""

    db: str | None
    tbl: str | None
    op: str
    ddl: str | None
    at: str | None
    cols: str | None
    types: str | None
    pk: str | None
    defaults: str | None
    n: int


class DecodedShapes(TypedDict):
    """The shapes of the hour's events and the files of the events folder they were counted
    from (name, size, modification time: `recon.layout.folder_files`)."""

    events_files: list[tuple[str, int, int]]
    shapes: list[EventShape]
    winners_files: NotRequired[list[tuple[str, int, int]]]
    """The files of the hour's winners folder (`recon.decode.premerge.prefold`) when the decode wrote
    it (absent: an hour decoded before the decode tasks pre-folded their events)."""
    superseded: NotRequired[list[SupersededCount]]
    """The events the winners leave out, per source table and op."""
    value_classes: NotRequired[list[ValueClassCount]]
    """The checked values of the events per source table, column and class
    (`recon.decode.premerge.value_classes`; absent: the decode did not count them all)."""


class ValueClassCount(TypedDict):
    db: str | None
    tbl: str | None
    column: str
    cls: str
    n: int


class SupersededCount(TypedDict):
    db: str | None
    tbl: str | None
    op: str
    n: int


SUMMARY_COLUMNS = ("kind", "topic", "partition", "name", "db", "tbl", *SHAPE_FIELDS)
"""What a row of a decode's summary is counted by (`TaskSummary.rows`); each also holds `n`,
`ddl_seen` (a DDL statement is among them) and `newest` (the events' newest source time)."""
_NO_SHAPE = (None,) * len(SHAPE_FIELDS)
SUPERSEDED = "superseded"
"""The kind of a summary row that counts events a decode task's pre-fold superseded."""


VALUES = "values"
"""The kind of a summary row that counts the checked values of a column of a source table in
one class (`recon.decode.premerge.value_classes`): its `name` is `[column, class]` in JSON."""


def _json(value: Any) -> str | None:
    """Spark's `to_json` of a list or a dict (what `with_shape_texts` writes)."""
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def shape_texts(row: dict[str, Any]) -> tuple[str | None, ...]:
    """The `SHAPE_FIELDS` texts of one event (a row of Arrow's `to_pylist`: maps as pairs)."""
    if row["op"] == "ddl":
        at = None if row["order_key"] is None else row["order_key"].hex().upper()
        return (row["ddl"], at, None, None, None, None)
    image = row["after"] if row["after"] is not None else row["before"]
    types, defaults = row["types"], row["defaults"]
    return (
        None,
        None,
        None if image is None else _json([k for k, _ in image]),
        None if types is None else _json(dict(types)),
        _json(row["pk"]),
        None if defaults is None else _json(dict(defaults)),
    )


class TaskSummary:
    """What a decode task's output holds, counted as the task writes it: the decoder's
    counters per partition, the events per table, op and shape (from the stream's `shape`
    rows), the newest source time per table, and the quarantine's reasons."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[Any, ...]] = Counter()
        self.ddl: set[tuple[Any, ...]] = set()
        self.newest: dict[tuple[str | None, str | None], int] = {}

    def add(self, kind: str, batch: pa.RecordBatch) -> bool:
        """Count `batch` of one row `kind`; True: it is counted only, not written (counters
        and shapes)."""
        if kind == "stat":
            for r in batch.select(["topic", "partition", "stat", "n"]).to_pylist():
                key = ("stat", r["topic"], r["partition"], r["stat"], None, None, *_NO_SHAPE)
                self.counts[key] += r["n"]
            return True
        if kind == "shape":
            for r in batch.to_pylist():
                key = ("event", None, None, r["op"], r["db"], r["tbl"], *shape_texts(r))
                self.counts[key] += r["n"]
                if r["op"] == "ddl":
                    self.ddl.add(key)
            return True
        if kind == "event":
            self._add_newest(batch)
        elif kind == "quarantine":
            self._add_reasons(batch)
        return False

    def add_superseded(self, counts: Counter[tuple[str | None, str | None, str]]) -> None:
        """The events the task's pre-fold superseded, per source table and op
        (`recon.decode.premerge.prefold`): rows of kind `superseded`."""
        for (db, tbl, op), n in counts.items():
            self.counts[(SUPERSEDED, None, None, op, db, tbl, *_NO_SHAPE)] += n

    def add_value_classes(self, counts: Counter[tuple[str | None, str | None, str, str]]) -> None:
        """The task's checked values per source table, column and class
        (`recon.decode.premerge.value_classes.ValueClasses`): rows of kind `values`."""
        for (db, tbl, column, cls), n in counts.items():
            self.counts[(VALUES, None, None, _json([column, cls]), db, tbl, *_NO_SHAPE)] += n

    def _add_newest(self, batch: pa.RecordBatch) -> None:
        by_table = pa.Table.from_batches([batch.select(["db", "tbl", "event_time_ms"])])
        newest = by_table.group_by(["db", "tbl"], use_threads=False).aggregate(
            [("event_time_ms", "max")]
        )
        for r in newest.to_pylist():
            ms, table = r["event_time_ms_max"], (r["db"], r["tbl"])
            if ms is not None:
                self.newest[table] = max(self.newest.get(table, ms), ms)

    def _add_reasons(self, batch: pa.RecordBatch) -> None:
        reasons = pa.table({"reason": batch.column("reason"),
                            "ddl": pc.is_valid(batch.column("ddl"))})  # fmt: skip
        counted = reasons.group_by(["reason", "ddl"], use_threads=False).aggregate(
            [("reason", "count", pc.CountOptions(mode="all"))]
        )
        for r in counted.to_pylist():
            key = ("quarantine", None, None, r["reason"], None, None, *_NO_SHAPE)
            self.counts[key] += r["reason_count"]
            if r["ddl"]:
                self.ddl.add(key)

    def rows(self) -> list[dict[str, Any]]:
        """The summary as rows (`SUMMARY_COLUMNS`, `n`, `ddl_seen`, `newest`)."""
        out = []
        for key, n in self.counts.items():
            row = dict(zip(SUMMARY_COLUMNS, key, strict=True))
            newest = self.newest.get((row["db"], row["tbl"])) if row["kind"] == "event" else None
            out.append({**row, "n": n, "ddl_seen": key in self.ddl, "newest": newest})
        return out


def summary_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of several summaries (the tasks', and Spark's aggregate of what the decode stage
    adds: `shape_keys`, `with_shape_texts`) added up by `SUMMARY_COLUMNS`."""
    added: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        key = tuple(r[c] for c in SUMMARY_COLUMNS)
        got = added.get(key)
        if got is None:
            added[key] = {**{c: r[c] for c in SUMMARY_COLUMNS}, "n": int(r["n"]),
                          "ddl_seen": bool(r["ddl_seen"]), "newest": r["newest"]}  # fmt: skip
            continue
        got["n"] += int(r["n"])
        got["ddl_seen"] = got["ddl_seen"] or bool(r["ddl_seen"])
        if r["newest"] is not None:
            got["newest"] = max(got["newest"] or r["newest"], r["newest"])
    return list(added.values())
