"""The table model DDL is read into (`TableDef`), and the exact SQL-literal parser for TDSQL's
positional row values (formats.md 2.2). DDL itself is read by `recon.core.ddl` (sqlglot)."""

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
    defaults: dict[str, str] = field(default_factory=dict)
    """What rows that existed before a column was added read in it (its DEFAULT literal, or the
    implicit default of a NOT NULL column: 0, '', the zero date); absent = NULL or not known."""
    unreadable: str | None = None
    """Set when a DDL of this table could not be read: its columns are unknown from then on
    (until a CREATE TABLE in the stream or the config's `ddl:` defines them again)."""
    renames: dict[str, str] = field(default_factory=dict, compare=False)
    """Filled by an ALTER TABLE read: old name -> new name of the columns it renamed."""
    unknown_defaults: dict[str, str] = field(default_factory=dict, compare=False)
    """Filled by an ALTER TABLE read: columns added with a default it cannot evaluate
    (CURRENT_TIMESTAMP, an expression) -> the default's text."""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "columns": self.columns,
            "types": self.types,
            "primary_key": self.primary_key,
        }
        if self.defaults:
            out["defaults"] = self.defaults
        if self.unreadable:
            out["unreadable"] = self.unreadable
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TableDef:
        return cls(
            list(d.get("columns") or []),
            dict(d.get("types") or {}),
            list(d.get("primary_key") or []),
            dict(d.get("defaults") or {}),
            d.get("unreadable") or None,
        )


_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"


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
