"""Just enough MySQL DDL and SQL-literal parsing for formats that carry no column names/types.

TDSQL binlog JSON rows are positional SQL literals (formats.md 2.2): names and types come from
`CREATE TABLE` / `ALTER TABLE` seen in the stream or given in the pipeline config.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from recon.core.values import b64
from recon.errors import DecodeError


@dataclass
class TableDef:
    """Column order, MySQL types and primary key of one table."""

    columns: list[str] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)  # column -> MySQL type text
    primary_key: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {"columns": self.columns, "types": self.types, "primary_key": self.primary_key}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TableDef:
        return cls(
            list(d.get("columns") or []),
            dict(d.get("types") or {}),
            list(d.get("primary_key") or []),
        )


_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
_CREATE_RE = re.compile(
    rf"^\s*create\s+(?:temporary\s+)?table\s+(?:if\s+not\s+exists\s+)?((?:{_IDENT}\s*\.\s*)?{_IDENT})\s*\(",
    re.I | re.S,
)
_ALTER_RE = re.compile(
    rf"^\s*alter\s+(?:online\s+|ignore\s+)*table\s+((?:{_IDENT}\s*\.\s*)?{_IDENT})\s+(.*)$",
    re.I | re.S,
)
_CONSTRAINT_WORDS = (
    "primary",
    "key",
    "index",
    "unique",
    "constraint",
    "foreign",
    "fulltext",
    "spatial",
    "check",
)


def unquote_ident(s: str) -> str:
    s = s.strip()
    if s.startswith("`") and s.endswith("`"):
        return s[1:-1].replace("``", "`")
    return s


def split_qualified(name: str) -> tuple[str | None, str]:
    parts = re.findall(_IDENT, name)
    if len(parts) >= 2:
        return unquote_ident(parts[0]), unquote_ident(parts[1])
    return None, unquote_ident(parts[0])


def _split_top(body: str) -> list[str]:
    """Split on commas at parenthesis depth 0, outside quotes."""
    out, depth, cur, quote = [], 0, [], ""
    for ch in body:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur))
    return out


def _column_def(part: str) -> tuple[str, str, bool] | None:
    m = re.match(rf"\s*({_IDENT})\s+(.*)$", part, re.S)
    if not m:
        return None
    name = unquote_ident(m.group(1))
    rest = m.group(2).strip()
    tm = re.match(r"([A-Za-z]+(?:\s*\([^)]*\))?(?:\s+(?:unsigned|signed|zerofill)\b)*)", rest, re.I)
    mysql_type = re.sub(r"\s+", " ", tm.group(1)).strip().lower() if tm else rest.split()[0].lower()
    is_pk = bool(re.search(r"\bprimary\s+key\b", rest, re.I))
    return name, mysql_type, is_pk


def _key_columns(part: str) -> list[str]:
    m = re.search(r"\((.*)\)", part, re.S)
    if not m:
        return []
    cols = []
    for c in _split_top(m.group(1)):
        c = re.sub(r"\(\d+\)", "", c).strip()  # prefix length: KEY (name(10))
        c = re.sub(r"\s+(asc|desc)$", "", c, flags=re.I)
        cols.append(unquote_ident(c))
    return cols


def parse_create_table(sql: str) -> tuple[str | None, str, TableDef]:
    """`CREATE TABLE [db.]t (...)` -> (db, table, TableDef). Raises ValueError if it is not one."""
    m = _CREATE_RE.match(sql)
    if not m:
        raise ValueError("not a CREATE TABLE statement")
    db, tbl = split_qualified(m.group(1))
    body_start = m.end()
    depth, i = 1, body_start
    quote = ""
    while i < len(sql) and depth:
        ch = sql[i]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        i += 1
    body = sql[body_start : i - 1]
    tdef = TableDef()
    for part in _split_top(body):
        first = part.strip().split(None, 1)[0].lower() if part.strip() else ""
        if first in _CONSTRAINT_WORDS:
            if re.match(r"\s*(constraint\s+\S+\s+)?primary\s+key", part, re.I):
                tdef.primary_key = _key_columns(part)
            continue
        col = _column_def(part)
        if col is None:
            continue
        name, mysql_type, is_pk = col
        tdef.columns.append(name)
        tdef.types[name] = mysql_type
        if is_pk and not tdef.primary_key:
            tdef.primary_key = [name]
    if not tdef.columns:
        raise ValueError("CREATE TABLE names no columns")
    return db, tbl, tdef


def apply_alter_table(sql: str, tdef: TableDef) -> tuple[str | None, str, TableDef] | None:
    """Apply `ALTER TABLE ... ADD/DROP/MODIFY/CHANGE COLUMN` to a copy of `tdef`.

    Returns None when the statement is not an ALTER TABLE. Clauses it does not understand
    (indexes, engine options) leave the columns unchanged.
    """
    m = _ALTER_RE.match(sql)
    if not m:
        return None
    db, tbl = split_qualified(m.group(1))
    new = TableDef(list(tdef.columns), dict(tdef.types), list(tdef.primary_key))
    for clause in _split_top(m.group(2)):
        _alter_clause(new, clause.strip())
    return db, tbl, new


_ADD_RE = re.compile(
    r"add\s+(?:column\s+)?(?!(?:primary|key|index|unique|constraint|foreign|"
    r"fulltext|spatial|check)\b)(.*)$",
    re.I | re.S,
)
_DROP_RE = re.compile(
    rf"drop\s+(?:column\s+)?(?!(?:primary|key|index|foreign|check|constraint)\b)({_IDENT})", re.I
)
_MODIFY_RE = re.compile(r"modify\s+(?:column\s+)?(.*)$", re.I | re.S)
_CHANGE_RE = re.compile(rf"change\s+(?:column\s+)?({_IDENT})\s+(.*)$", re.I | re.S)


def _alter_clause(new: TableDef, c: str) -> None:
    """Apply one clause of an ALTER TABLE to `new` (clauses it does not know change nothing)."""
    if re.match(r"add\s+(column\s+)?\(", c.lower()):
        inner = c[c.index("(") + 1 : c.rindex(")")]
        for part in _split_top(inner):
            col = _column_def(part)
            if col:
                _add(new, col[0], col[1], None)
    elif am := _ADD_RE.match(c):
        _add_one(new, am.group(1))
    elif dm := _DROP_RE.match(c):
        name = unquote_ident(dm.group(1))
        if name in new.types:
            new.columns.remove(name)
            del new.types[name]
    elif mm := _MODIFY_RE.match(c):
        col = _column_def(mm.group(1))
        if col and col[0] in new.types:
            new.types[col[0]] = col[1]
    elif cm := _CHANGE_RE.match(c):
        _change(new, unquote_ident(cm.group(1)), cm.group(2))


def _add_one(new: TableDef, rest: str) -> None:
    col = _column_def(rest)
    if not col:
        return
    after = None
    pm = re.search(rf"\bafter\s+({_IDENT})\s*$", rest, re.I)
    if pm:
        after = unquote_ident(pm.group(1))
    elif re.search(r"\bfirst\s*$", rest, re.I):
        after = ""
    _add(new, col[0], col[1], after)


def _change(new: TableDef, old: str, rest: str) -> None:
    col = _column_def(rest)
    if col and old in new.types:
        i = new.columns.index(old)
        new.columns[i] = col[0]
        del new.types[old]
        new.types[col[0]] = col[1]
        new.primary_key = [col[0] if k == old else k for k in new.primary_key]


def _add(tdef: TableDef, name: str, mysql_type: str, after: str | None) -> None:
    if name in tdef.types:
        tdef.types[name] = mysql_type
        return
    if after is None:
        tdef.columns.append(name)
    elif after == "":
        tdef.columns.insert(0, name)
    elif after in tdef.columns:
        tdef.columns.insert(tdef.columns.index(after) + 1, name)
    else:
        tdef.columns.append(name)
    tdef.types[name] = mysql_type


_ESCAPES = {
    "0": "\0",
    "'": "'",
    '"': '"',
    "b": "\b",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "Z": "\x1a",
    "\\": "\\",
    "%": "\\%",
    "_": "\\_",
}


def parse_sql_literal(text: str | None) -> tuple[str | None, bool]:
    """One SQL literal as MySQL writes it -> (value text, is_binary).

    `NULL` (unquoted, any case) -> None; `'it''s'` / `'a\\'b'` -> unescaped text; bare numbers
    as they are; `X'0AFF'`, `0x0AFF` and `b'101'` -> the bytes, returned as base64 with
    is_binary=True. Raises DecodeError on an unterminated or malformed literal.
    """
    if text is None:
        return None, False
    t = text.strip()
    if t.upper() == "NULL":
        return None, False
    if len(t) >= 2 and t[0] in "'\"":
        q = t[0]
        if t[-1] != q:
            raise DecodeError(f"unterminated string literal {text[:40]!r}")
        out = []
        i, n = 1, len(t) - 1
        while i < n:
            ch = t[i]
            if ch == "\\" and i + 1 < n:
                out.append(_ESCAPES.get(t[i + 1], t[i + 1]))
                i += 2
                continue
            if ch == q:
                if i + 1 < n and t[i + 1] == q:
                    out.append(q)
                    i += 2
                    continue
                raise DecodeError(f"stray quote inside string literal {text[:40]!r}")
            out.append(ch)
            i += 1
        return "".join(out), False
    hm = re.fullmatch(r"[xX]'([0-9a-fA-F]*)'|0x([0-9a-fA-F]+)", t)
    if hm:
        hexs = hm.group(1) if hm.group(1) is not None else hm.group(2)
        if len(hexs) % 2:
            hexs = "0" + hexs
        return b64(bytes.fromhex(hexs)), True
    bm = re.fullmatch(r"[bB]'([01]*)'|0b([01]+)", t)
    if bm:
        bits = bm.group(1) if bm.group(1) is not None else bm.group(2)
        n_ = int(bits or "0", 2)
        return b64(n_.to_bytes(max(1, (len(bits) + 7) // 8), "big")), True
    if re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", t):
        return t, False
    raise DecodeError(f"not an SQL literal: {text[:40]!r}")
