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

from pyspark.sql import Column
from pyspark.sql import functions as F

SHAPE_FIELDS = ("ddl", "at", "cols", "types", "pk", "defaults")
"""The text that tells an event's shape apart (Spark's JSON of each part; `at`: the hex of a
DDL statement's order key, which sorts as the key does)."""


def shape_columns(among: Column | None = None) -> list[Column]:
    """The `SHAPE_FIELDS` of each event row (null for rows outside `among`)."""
    is_ddl = F.col("op") == "ddl"
    not_ddl = F.col("op") != "ddl"
    if among is not None:
        is_ddl, not_ddl = among & is_ddl, among & not_ddl
    parts = {
        "ddl": (is_ddl, F.col("ddl")),
        "at": (is_ddl, F.hex("order_key")),
        "cols": (not_ddl, F.to_json(F.map_keys(F.coalesce("after", "before")))),
        "types": (not_ddl, F.to_json("types")),
        "pk": (not_ddl, F.to_json("pk")),
        "defaults": (not_ddl, F.to_json("defaults")),
    }
    return [F.when(cond, value).alias(name) for name, (cond, value) in parts.items()]


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
