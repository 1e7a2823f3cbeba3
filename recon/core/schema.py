"""Published table schemas: logical column types -> Spark types, and the schema history a table's
state keeps (contract 4: DECIMAL exact, BIGINT UNSIGNED without overflow, BLOB bytes, DATETIME
without zone, TIMESTAMP in UTC).

A column seen for the first time (from DDL, from a new key in an image, from the snapshot) is
appended and the version goes up; rows written before it read the column's initial default (from
the DDL that added it: its DEFAULT, or the implicit one of a NOT NULL column), else NULL. DDL in
the stream also renames and drops columns, as the database does. A column whose logical type was
`unknown` (text without type information) takes the first real type that arrives; a promotion
Iceberg allows is applied; any other type change keeps the published type and is recorded in the
history.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

DECIMAL_RE = re.compile(r"^decimal\((\d+),(\d+)\)$")
"""A DECIMAL's logical or Spark type, `decimal(p,s)`: (precision, scale)."""

# logical type -> Spark SQL type
_SPARK = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "uint8": "int",
    "uint16": "int",
    "uint32": "bigint",
    "int64": "bigint",
    "uint64": "decimal(20,0)",
    "float32": "float",
    "float64": "double",
    "bool": "boolean",
    "binary": "binary",
    "date": "date",
    "datetime": "timestamp_ntz",
    "timestamp": "timestamp",
    "year": "int",
}


def spark_type(logical: str) -> str:
    """The Spark SQL type a logical type is published as (text-like types stay strings)."""
    m = DECIMAL_RE.match(logical)
    if m:
        p, s = int(m.group(1)), int(m.group(2))
        if p > 38:  # MySQL allows DECIMAL(65,30); Spark and Iceberg stop at 38 digits
            return "string"
        return f"decimal({max(p, 1)},{min(s, p)})"
    return _SPARK.get(logical, "string")


def widens(old: str, new: str) -> bool:
    """Whether a published column of Spark type `old` can take type `new` (Iceberg's
    promotions: int -> bigint, float -> double, decimal precision up at the same scale)."""
    if old == new or (old, new) in (("int", "bigint"), ("float", "double")):
        return True
    mo, mn = DECIMAL_RE.match(old), DECIMAL_RE.match(new)
    return bool(mo and mn and mo.group(2) == mn.group(2) and int(mn.group(1)) >= int(mo.group(1)))


def cast_expr(column_sql: str, logical: str) -> str:
    """Spark SQL turning canonical text (recon.core.values) into the published type. Values that
    do not parse (MySQL zero dates, say) become NULL rather than failing the hour."""
    t = spark_type(logical)
    x = column_sql
    if t == "string":
        return x
    if t == "binary":
        return f"try_to_binary({x}, 'base64')"
    if t in ("date", "timestamp_ntz", "timestamp"):
        # only text that starts like a date is a date (Spark would read "18460" as year 18460);
        # a whole number is Debezium's own encoding sent without its schema (schemas.enable
        # false) into a column typed by `ddl:` or another message: DATE = days since the epoch,
        # DATETIME/TIMESTAMP = milliseconds (below 10^14, i.e. before year 5138) else micros
        text = f"when {x} rlike '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}' then try_cast({x} as {t})"
        if t == "date":
            num = f"date_add(date'1970-01-01', try_cast({x} as int))"
        else:
            n = f"try_cast({x} as bigint)"
            num = (
                f"cast(case when abs({n}) < 100000000000000 then timestamp_millis({n}) "
                f"else timestamp_micros({n}) end as {t})"
            )
        return f"case {text} when {x} rlike '^-?[0-9]{{1,19}}$' then {num} end"
    return f"try_cast({x} as {t})"


def canonical_default(text: str, logical: str) -> str | None:
    """A DEFAULT literal as the canonical text a decoder gives a value of the column (so an
    image that carries the default and a row that reads it are the same row); None when the
    literal is not a value of the type."""
    try:
        if _SPARK.get(logical) in ("int", "bigint") or logical == "uint64":
            return str(int(Decimal(text)))
        m = DECIMAL_RE.match(logical)
        if m:
            return str(Decimal(text).quantize(Decimal(1).scaleb(-int(m.group(2)))))
    except (InvalidOperation, ValueError):
        return None
    if logical == "binary":
        return base64.b64encode(text.encode()).decode()
    if logical == "datetime" and len(text) == 10:
        return text + " 00:00:00"
    return text


@dataclass
class TableSchema:
    """Columns in source order with their logical types, the key, and a version per change."""

    name: str
    columns: list[tuple[str, str]] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    version: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    declared: list[str] = field(default_factory=list)  # typed by the config's `ddl:`: final
    defaults: dict[str, str] = field(default_factory=dict)
    """Column -> what rows written before the column was added read (canonical text)."""
    former: dict[str, str] = field(default_factory=dict)
    """Earlier name -> current name of renamed columns (images from before a rename)."""
    dropped: list[str] = field(default_factory=list)
    """Columns DDL dropped (images from before the drop still carry them)."""
    ddl_through: str = ""
    """Order key (hex) of the last DDL applied: an hour run again does not apply it twice."""

    @property
    def multiset(self) -> bool:
        return not self.primary_key

    def logical(self, col: str) -> str | None:
        for c, t in self.columns:
            if c == col:
                return t
        return None

    def observe(self, cols: list[str], types: dict[str, str], why: str) -> bool:
        """Fold in columns seen in an image/DDL/snapshot; True when the published schema changed."""
        changed: list[str] = []
        index = {c: i for i, (c, _) in enumerate(self.columns)}
        for c in cols:
            t = types.get(c) or "unknown"
            if c not in index:
                self.former.pop(c, None)  # a new column of a name an earlier one had
                self.dropped = [d for d in self.dropped if d != c]
                index[c] = len(self.columns)
                self.columns.append((c, t))
                changed.append(f"add {c} {t}")
                continue
            old = self.columns[index[c]][1]
            if old == t or t == "unknown" or c in self.declared:
                continue
            if old != "unknown" and widens(spark_type(t), spark_type(old)):
                continue  # same published type: the first logical type stays (a message that
                # types a BIGINT UNSIGNED as DECIMAL(20,0) must not turn it into a decimal)
            if old == "unknown" or widens(spark_type(old), spark_type(t)):
                self.columns[index[c]] = (c, t)
                if spark_type(old) != spark_type(t):
                    changed.append(f"type {c} {old} -> {t}")
            elif not any(h["change"] == f"type conflict {c}: {old} vs {t}" for h in self.history):
                self.history.append(  # once: every later message would repeat it
                    {
                        "version": self.version,
                        "change": f"type conflict {c}: {old} vs {t}",
                        "why": why,
                    }
                )
        if changed:
            self._record("; ".join(changed), why)
        return bool(changed)

    def _record(self, change: str, why: str) -> None:
        self.version += 1
        self.history.append({"version": self.version, "change": change, "why": why})

    def rename(self, old: str, new: str, why: str) -> bool:
        """RENAME COLUMN / CHANGE old new, as the database did it (values kept)."""
        at = [i for i, (c, _) in enumerate(self.columns) if c == old]
        if not at or self.logical(new) is not None:
            return False
        self.columns[at[0]] = (new, self.columns[at[0]][1])
        self.primary_key = [new if k == old else k for k in self.primary_key]
        self.declared = [new if k == old else k for k in self.declared]
        if old in self.defaults:
            self.defaults[new] = self.defaults.pop(old)
        self.former = {k: (new if v == old else v) for k, v in self.former.items() if k != new}
        self.former[old] = new
        self.dropped = [c for c in self.dropped if c != new]
        self._record(f"rename {old} -> {new}", why)
        return True

    def drop(self, col: str, why: str) -> bool:
        """DROP COLUMN: the published table drops it too (earlier versions keep it)."""
        if self.logical(col) is None or col in self.primary_key:
            return False
        self.columns = [(c, t) for c, t in self.columns if c != col]
        self.declared = [c for c in self.declared if c != col]
        self.defaults.pop(col, None)
        self.former = {k: v for k, v in self.former.items() if v != col}
        self.dropped.append(col)
        self._record(f"drop {col}", why)
        return True

    def retype(self, col: str, logical: str, why: str) -> bool:
        """MODIFY/CHANGE to another type in DDL of the stream: newer than a `ddl:` in the
        config, so it applies to declared columns too (promotions only; otherwise the conflict
        is recorded and the published type stays)."""
        declared = self.declared
        self.declared = [c for c in declared if c != col]
        try:
            return self.observe([col], {col: logical}, why)
        finally:
            self.declared = declared

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "columns": [[c, t] for c, t in self.columns],
            "primary_key": self.primary_key,
            "version": self.version,
            "history": self.history,
            "declared": self.declared,
            "defaults": self.defaults,
            "former": self.former,
            "dropped": self.dropped,
            "ddl_through": self.ddl_through,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TableSchema:
        return cls(
            d["name"],
            [(c, t) for c, t in d["columns"]],
            list(d["primary_key"]),
            int(d["version"]),
            list(d.get("history", [])),
            list(d.get("declared", [])),
            dict(d.get("defaults", {})),
            dict(d.get("former", {})),
            list(d.get("dropped", [])),
            str(d.get("ddl_through", "")),
        )
