"""The schema of each merged table after an hour: the manifest's, or a new one from the config;
then the hour's DDL (ADD, DROP, RENAME, MODIFY/CHANGE COLUMN) and the columns and types its
images carry. Images are brought into the schema's columns (`image_fixes`) before they are
merged, so a row keeps its identity across a schema change."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recon.config import PipelineConfig, TableConfig
from recon.core.ddl import apply_alter_table
from recon.core.schema import TableSchema, canonical_default
from recon.core.sqlddl import TableDef
from recon.core.values import mysql_logical_type
from recon.decode.summary import SHAPE_FIELDS, EventShape, shape_keys, with_shape_texts
from recon.layout import hour_text
from recon.merge.contributions import route_table
from recon.merge.manifest import Manifest


@dataclass
class HourSummary:
    """What the merge needs to know about an hour's events before it reads them again, from
    one aggregate (`summarize_hour`): the count per table and op, the DDL rows, and each
    distinct shape of the images as they arrived (before renames and drops are applied)."""

    by_table_op: dict[str, dict[str, int]] = field(default_factory=dict)
    ddl: list[tuple[str, str, str]] = field(default_factory=list)
    """(table, statement, hex of its order key)"""
    shapes: list[tuple[str, str | None, str | None, str | None, str | None]] = field(
        default_factory=list
    )
    """(table, image columns, types, primary key, defaults), each as Spark's JSON text"""

    def add(self, table: str, op: str, n: int, *shape: Any) -> None:
        """`n` events of `table` and `op` with one shape (`recon.decode.summary.SHAPE_FIELDS`)."""
        ddl, at, cols, types, pk, defaults = shape
        ops = self.by_table_op.setdefault(table, {})
        ops[op] = ops.get(op, 0) + n
        if op == "ddl":
            self.ddl.append((table, ddl or "", at))
        elif op is not None:
            self.shapes.append((table, cols, types, pk, defaults))


def summarize_hour(events: DataFrame) -> HourSummary:
    """The hour's counts, DDL rows and image shapes in one job (they were three passes over
    the events): the groups are few (tables x ops x shapes, one per DDL statement). For an hour
    whose decode counted them (`summary_of_shapes`), the merge need not run it."""
    groups = events.groupBy("table", "op", *shape_keys()).agg(F.count("*").alias("n"))
    rows = with_shape_texts(groups).collect()
    out = HourSummary()
    for r in rows:
        out.add(r["table"], r["op"], int(r["n"]), *(r[f] for f in SHAPE_FIELDS))
    return out


def summary_of_shapes(cfg: PipelineConfig, shapes: list[EventShape]) -> HourSummary | None:
    """The summary `summarize_hour` gives, from the shapes the decode counted per source table
    (routed to the published tables here as `route_expr` does); None when a table name holds
    a character Python's and Java's regular expressions treat apart (a line break)."""
    out = HourSummary()
    for s in shapes:
        table = route_table(cfg, s["db"], s["tbl"])
        if table is None:
            return None
        out.add(table, s["op"], s["n"], *(s[f] for f in SHAPE_FIELDS))  # type: ignore[literal-required]
    return out


def resolve_schemas(
    cfg: PipelineConfig,
    man: Manifest,
    summary: HourSummary,
    hour: datetime,
    names: list[str],
) -> tuple[dict[str, TableSchema], dict[str, bool], Callable[[DataFrame], DataFrame]]:
    """(schema per table, whether it changed this hour, what puts an hour's events' images in
    the columns of the schema: renamed, dropped and added columns as the database applied
    them; the same for any frame of the hour's events, its winners too)."""
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
    for name in _apply_ddl(schemas, summary.ddl, hour):
        changed[name] = True
    fixes = [image_fixes(schemas)]  # the images as the schema's columns stand before the hour
    observed, defaulted = _observe_images(schemas, man, summary.shapes, hour)
    for name in observed:
        changed[name] = True
    if defaulted:  # columns first seen in images that state their default (Debezium)
        fixes.append(image_fixes({n: schemas[n] for n in defaulted}))

    def normalize(events: DataFrame) -> DataFrame:
        for fix in fixes:
            for img, col in (fix or {}).items():
                events = events.withColumn(img, col)
        return events

    return schemas, changed, normalize


def normalize_image(img: Column, table: Column, schemas: dict[str, TableSchema]) -> Column:
    """An image map in the table's current columns: keys of renamed columns renamed, dropped
    columns left out, and a column added with a default filled in when the image predates it
    (the database gave every existing row that value)."""
    out = img
    for name, s in schemas.items():
        if not (s.former or s.dropped or s.defaults):
            continue
        fixed = _in_columns(img, s)
        out = F.when((table == name) & img.isNotNull(), fixed).otherwise(out)
    return out


def _in_columns(img: Column, s: TableSchema) -> Column:
    fixed = img
    if s.former:
        stale = [
            F.when(reduce(Column.__or__, [F.map_contains_key(img, k) for k in older]), name)
            for older, name in _stale_when(s.former)
        ]
        if stale:  # a name an image holds from before it was renamed onto: not its value now
            held = F.array(*stale)
            fixed = F.map_filter(
                fixed, lambda k, _v: ~F.coalesce(F.array_contains(held, k), F.lit(False))
            )
        names = lit_map_str(s.former)
        fixed = F.transform_keys(fixed, lambda k, _v: F.coalesce(names[k], k))
    if s.dropped:
        gone = F.array(*[F.lit(c) for c in s.dropped])
        fixed = F.map_filter(fixed, lambda k, _v: ~F.array_contains(gone, k))
    if s.defaults:
        have = fixed
        missing = F.map_filter(lit_map_str(s.defaults), lambda k, _v: ~F.map_contains_key(have, k))
        fixed = F.map_concat(fixed, missing)
    return fixed


def _stale_when(former: dict[str, str]) -> list[tuple[list[str], str]]:
    """(names, name): an image that carries one of the names holds `name` from before it was
    renamed onto (its column then was another, dropped or renamed away since), so that `name`
    is not the column's value now. Per new name, the names renamed onto it in the order the
    renames were recorded (the oldest first), then the new name itself: each is stale in an
    image that carries one before it. A map may hold a key once: without this, `DROP COLUMN b,
    RENAME COLUMN a TO b` made an image from before both a map with `b` twice."""
    onto: dict[str, list[str]] = {}
    for old, new in former.items():
        onto.setdefault(new, []).append(old)
    out = []
    for new, olds in onto.items():
        names = [*olds, new]
        out += [(names[:i], names[i]) for i in range(1, len(names))]
    return out


def normalized_columns(cols: list[str], s: TableSchema) -> list[str]:
    """An image's column names as `normalize_image` leaves them (the same order)."""
    have = set(cols)
    stale = {name for older, name in _stale_when(s.former) if have.intersection(older)}
    out = [s.former.get(c, c) for c in cols if c not in stale]
    if s.dropped:
        out = [c for c in out if c not in s.dropped]
    return out + [c for c in sorted(s.defaults) if c not in out]


def lit_map_str(d: dict[str, str]) -> Column:
    return F.create_map(*[F.lit(x) for kv in sorted(d.items()) for x in kv])


def image_fixes(schemas: dict[str, TableSchema]) -> dict[str, Column] | None:
    """Per image column, its expression in the tables' current columns (`normalize_image`);
    None when no table renamed, dropped or defaulted a column. Built now, from the schemas as
    they are now."""
    if not any(s.former or s.dropped or s.defaults for s in schemas.values()):
        return None
    return {
        img: normalize_image(F.col(img), F.col("table"), schemas) for img in ("before", "after")
    }


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
        for c, value in tdef.defaults.items():
            default = canonical_default(value, s.logical(c) or "unknown")
            if default is not None:
                s.defaults[c] = default
    return s


def _apply_ddl(
    schemas: dict[str, TableSchema], ddl: list[tuple[str, str, str]], hour: datetime
) -> set[str]:
    """The hour's ALTER TABLEs in source order: columns added (with the default existing rows
    read), renamed, dropped and retyped; the tables whose schema changed."""
    changed = set()
    for table, sql, at in sorted((d for d in ddl if d[0] in schemas), key=lambda d: d[2]):
        s = schemas[table]
        if at <= s.ddl_through:
            continue  # applied when this hour (or a later one) ran before
        s.ddl_through = at
        if _apply_one_ddl(s, sql, f"DDL in {hour_text(hour)}"):
            changed.add(table)
    return changed


_UNSET = "\x00"


def _apply_one_ddl(s: TableSchema, sql: str, why: str) -> bool:
    cur = TableDef([c for c, _ in s.columns], {c: _UNSET for c, _ in s.columns})
    cur.primary_key = list(s.primary_key)
    try:
        res = apply_alter_table(sql, cur)
    except ValueError:
        res = None
    if res is None:
        return False
    tdef = res[2]
    changed = False
    for old, new in tdef.renames.items():
        changed |= s.rename(old, new, why)
    for c in cur.columns:
        if c not in tdef.types and c not in tdef.renames:
            changed |= s.drop(c, why)
    for c in tdef.columns:
        t = tdef.types.get(c, _UNSET)
        if c in cur.types or c in tdef.renames.values():
            if t != _UNSET:  # MODIFY / CHANGE to a type
                changed |= s.retype(c, mysql_logical_type(t), why)
            continue
        lt = mysql_logical_type(t)
        changed |= s.observe([c], {c: lt}, why)
        value = tdef.defaults.get(c)
        default = canonical_default(value, lt) if value is not None else None
        if default is not None:
            s.defaults[c] = default
        elif c in tdef.unknown_defaults or value is not None:
            s.history.append(
                {
                    "version": s.version,
                    "change": f"default of {c} for existing rows not known "
                    f"({tdef.unknown_defaults.get(c) or value}): they read NULL",
                    "why": why,
                }
            )
    return changed


def _observe_images(
    schemas: dict[str, TableSchema],
    man: Manifest,
    raw_shapes: list[tuple[str, str | None, str | None, str | None, str | None]],
    hour: datetime,
) -> tuple[set[str], set[str]]:
    """Columns and types of the hour's images, each distinct shape once, its columns as the
    schema after the hour's DDL names them: (the tables whose schema changed, those that got a
    default for a column added to them)."""
    changed, defaulted = set(), set()
    shapes = set()
    for table, cols, types, pk, defaults in raw_shapes:
        if table not in schemas:
            continue
        if cols is not None:  # named before any of them is observed, as the images are
            named = normalized_columns(json.loads(cols), schemas[table])
            cols = json.dumps(named, ensure_ascii=False, separators=(",", ":"))
        shapes.add((table, cols, types, pk, defaults))
    had = {n: {c for c, _ in s.columns} for n, s in schemas.items()}
    for table, cols_text, types_text, pk_text, defaults_text in sorted(
        shapes, key=lambda r: tuple(x or "" for x in r)
    ):
        s = schemas[table]
        cols = json.loads(cols_text or "[]")
        types = json.loads(types_text or "{}")
        if s.observe(cols, types, f"images in {hour_text(hour)}"):
            changed.add(table)
        stated = json.loads(defaults_text or "{}")
        for c in cols:
            old = had[table]
            if old and c not in old and stated.get(c) is not None and c not in s.defaults:
                s.defaults[c] = stated[c]  # canonical already: the decoder read it as a value
                defaulted.add(table)
        pk = json.loads(pk_text or "[]")
        if pk and not s.primary_key and not man["tables"].get(table):
            s.primary_key = pk
    return changed, defaulted
