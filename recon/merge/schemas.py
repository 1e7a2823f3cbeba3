"""The schema of each merged table after an hour: the manifest's, or a new one from the config;
then the hour's DDL (ADD COLUMN) and the columns and types its images carry."""

from __future__ import annotations

import json
from datetime import datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from recon.config import PipelineConfig, TableConfig
from recon.core.ddl import apply_alter_table
from recon.core.schema import TableSchema
from recon.core.sqlddl import TableDef
from recon.core.values import mysql_logical_type
from recon.layout import hour_text
from recon.merge.manifest import Manifest


def resolve_schemas(
    cfg: PipelineConfig, man: Manifest, events: DataFrame, hour: datetime, names: list[str]
) -> tuple[dict[str, TableSchema], dict[str, bool]]:
    """(schema per table, whether it changed this hour) for the tables merged."""
    schemas: dict[str, TableSchema] = {}
    changed: dict[str, bool] = {}
    for name in names:
        entry = man["tables"].get(name)
        if entry:
            schemas[name] = TableSchema.from_json(entry["schema"])
            changed[name] = False
        else:
            schemas[name] = initial_schema(name, cfg.tables[name])
            changed[name] = True
    mine = events.where(F.col("table").isin(names))
    for name in _apply_ddl(schemas, mine, hour):
        changed[name] = True
    for name in _observe_images(schemas, man, mine, hour):
        changed[name] = True
    return schemas, changed


def initial_schema(name: str, tcfg: TableConfig) -> TableSchema:
    """A table's schema before anything was seen: its key and what the config declares."""
    s = TableSchema(name, primary_key=list(tcfg.primary_key))
    tdef = tcfg.table_def()
    if tdef is not None:
        s.observe(
            tdef.columns, {c: mysql_logical_type(tdef.types.get(c)) for c in tdef.columns}, "config"
        )
        s.primary_key = s.primary_key or list(tdef.primary_key)
        if tcfg.ddl:
            s.declared = list(tdef.columns)
    return s


def _apply_ddl(schemas: dict[str, TableSchema], mine: DataFrame, hour: datetime) -> set[str]:
    """Columns the hour's DDL adds, in source order; the tables whose schema changed."""
    changed = set()
    ddl_rows = mine.where(F.col("op") == "ddl").orderBy("order_key").select("table", "ddl")
    for r in ddl_rows.collect():
        s = schemas[r["table"]]
        cur = TableDef([c for c, _ in s.columns], {}, list(s.primary_key))
        try:
            res = apply_alter_table(r["ddl"] or "", cur)
        except ValueError:
            res = None
        if res is None:
            continue
        tdef = res[2]
        new = [c for c in tdef.columns if c not in cur.columns]
        types = {c: mysql_logical_type(tdef.types.get(c)) for c in new}
        if new and s.observe(new, types, f"DDL in {hour_text(hour)}"):
            changed.add(r["table"])
    return changed


def _observe_images(
    schemas: dict[str, TableSchema], man: Manifest, mine: DataFrame, hour: datetime
) -> set[str]:
    """Columns and types of the hour's images (one row per distinct shape reaches the driver)."""
    changed = set()
    shapes = (
        mine.where(F.col("op") != "ddl")
        .select(
            "table",
            F.to_json(F.map_keys(F.coalesce("after", "before"))).alias("cols"),
            F.to_json("types").alias("types"),
            F.to_json("pk").alias("pk"),
        )
        .distinct()
        .collect()
    )
    for r in sorted(shapes, key=lambda r: (r["table"], r["cols"] or "", r["types"] or "")):
        s = schemas[r["table"]]
        cols = json.loads(r["cols"] or "[]")
        types = json.loads(r["types"] or "{}")
        if s.observe(cols, types, f"images in {hour_text(hour)}"):
            changed.add(r["table"])
        pk = json.loads(r["pk"] or "[]")
        if pk and not s.primary_key and not man["tables"].get(r["table"]):
            s.primary_key = pk
    return changed
