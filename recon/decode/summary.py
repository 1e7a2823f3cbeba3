"""The shapes of an hour's events: what the merge must know of them before it reads them again
(`recon.merge.schemas.HourSummary`): the events per source table and op, each DDL statement,
and each distinct shape of the row images (their columns, types, key and defaults as sent).

The decode counts them in the aggregate it reads its own output back with (one pass it makes
anyway), and keeps them with its counters, with the events folder's files they were counted
from; the merge takes them from there instead of reading the hour's events once more (a Spark
job, a tenth of a small hour's merge), and counts them itself for an hour decoded before, or
whose events are no longer the ones counted.
"""

from __future__ import annotations

from typing import TypedDict

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
