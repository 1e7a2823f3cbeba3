"""The hour's winners: its events less those a decode task superseded (`recon.decode.premerge.prefold`),
merged instead of every event for the tables where that gives the same state and counts.

A table's hour is merged from its winners (`prefold_tables`) when:
- its decode wrote them, for the very events the merge reads (the decode's record of both
  folders' files);
- the table has a key, every event of the hour states that key (the hour's shapes), and the
  schema renames, drops or defaults none of its columns: the decode's key of an event is then
  never coarser than the merge's (`recon.decode.premerge.prefold`);
- no change of the hour is set aside as a value that does not fit, or skipped by the snapshot's
  watermark, or not comparable to it (one narrow count over every event, the only per-event
  pass left; the flags' own check is what `recon.merge.unfit` runs): such a change could be a
  key's winner, whose runner-up the winners do not hold.
Then the state is the same, since a superseded change loses to a later one of its key; the
changes per op that entered the merge add the superseded ones (`superseded_by_table`, counted
by the decode), and the changes that are stale or already applied count them through the
order keys their winners carry (`recon.merge.contributions.SUP`, `recon.merge.state.skip_counts`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recon.config import PipelineConfig
from recon.core.schema import TableSchema
from recon.core.watermark import Watermark
from recon.decode.premerge.prefold import WINNER_COLUMNS
from recon.decode.summary import DecodedShapes
from recon.merge.contributions import SUP_COLUMNS, route_table
from recon.merge.schemas import HourSummary
from recon.merge.unfit import UNFIT


def no_sup() -> Column:
    return F.array().cast("array<binary>")


def without_sup(events: DataFrame) -> DataFrame:
    """Events with the winners' added columns, nothing superseded."""
    return events.withColumns({c: no_sup() for c in SUP_COLUMNS})


FOLDED_COLUMNS = [*WINNER_COLUMNS, "table", UNFIT, *SUP_COLUMNS]
"""What the merge's contributions are made from, winners or events (`changes_to_fold`)."""


def read_winners(
    spark: SparkSession,
    decoded: DecodedShapes,
    winners_files: list[tuple[str, int, int]],
    events_files: list[tuple[str, int, int]],
    hour_events: Path,
    hour_winners: Path,
) -> DataFrame | None:
    """The hour's winners (None: the decode wrote none, or the winners folder's files,
    `winners_files`, are not those it recorded; the events' files the caller has checked):
    each winners file stands for the events file of its name, and the events files without
    one (a task that superseded too little to write it, or the events the decode added after
    its tasks) are read as they are."""
    recorded = [(str(f), int(n), int(t)) for f, n, t in decoded.get("winners_files", [])]
    won = [f for f, *_ in recorded if f.endswith(".parquet")]
    if not won or recorded != winners_files:
        return None
    rest = [f for f, *_ in events_files if f.endswith(".parquet") and f not in won]
    out = spark.read.parquet(*[str(hour_winners / f) for f in won])
    if rest:
        plain = spark.read.parquet(*[str(hour_events / f) for f in rest])
        out = out.unionByName(without_sup(plain.select(*WINNER_COLUMNS)))
    return out


def superseded_by_table(cfg: PipelineConfig, decoded: DecodedShapes) -> dict[str, dict[str, int]]:
    """Per published table and op, the events the winners leave out."""
    out: dict[str, dict[str, int]] = {}
    for c in decoded.get("superseded", []):
        table = route_table(cfg, c["db"], c["tbl"])
        if table is not None:
            ops = out.setdefault(table, {})
            ops[c["op"]] = ops.get(c["op"], 0) + int(c["n"])
    return out


def value_classes_by_table(
    cfg: PipelineConfig, decoded: DecodedShapes
) -> dict[str, dict[str, Counter[str]]] | None:
    """Per published table and column, the decode's count of its checked values per class
    (`recon.decode.premerge.value_classes`); None: the decode did not count them all."""
    if "value_classes" not in decoded:
        return None
    out: dict[str, dict[str, Counter[str]]] = {}
    for c in decoded["value_classes"]:
        table = route_table(cfg, c["db"], c["tbl"])
        if table is not None:
            out.setdefault(table, {}).setdefault(c["column"], Counter())[c["cls"]] += int(c["n"])
    return out


def keyed_as_stated(name: str, schema: TableSchema, summary: HourSummary) -> bool:
    """Whether table `name`'s merge keys its rows by the key columns each of its events states,
    untouched by the schema's renames, drops and defaults (`recon.decode.premerge.prefold`'s key is then
    never coarser than the merge's)."""
    pk = list(schema.primary_key)
    if not pk:
        return False
    touched = {*schema.former, *schema.former.values(), *schema.dropped, *schema.defaults}
    if touched.intersection(pk):
        return False
    stated = [s[3] for s in summary.shapes if s[0] == name]
    return bool(stated) and all(t is not None and json.loads(t) == pk for t in stated)


def clean_tables(
    events: DataFrame, tables: Iterable[str], unfit: Column, wm: Watermark | None
) -> list[str]:
    """Of `tables`, those none of whose changes of the hour (`events`) has a value that does
    not fit (`unfit`: `recon.merge.unfit.any_unfit`), or is skipped by the snapshot's watermark
    `wm` or not comparable to it: one narrow count over the events."""
    tables = list(tables)
    counts = [F.sum(F.when(unfit, 1).otherwise(0)).alias("unfit")]
    if wm is not None:  # compared among the changes that fit, as `watermark_skips` compares
        at_or_before = F.expr(wm.sql())
        counts.append(F.sum(F.when(~unfit & F.coalesce(at_or_before, F.lit(True)), 1)).alias("wm"))
    rows = (
        events.where(F.col("table").isin(tables) & (F.col("op") != "ddl"))
        .groupBy("table")
        .agg(*counts)
        .collect()
    )
    dirty = {r["table"] for r in rows if any(r[c] for c in r.asDict() if c != "table")}
    return [t for t in tables if t not in dirty]
