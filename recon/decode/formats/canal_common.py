"""What Canal's protobuf and flat JSON modes share: column types and value text (formats.md 3.4)."""

from __future__ import annotations

import re

from recon.core.values import b64, mysql_logical_type, normalize_datetime_text, parse_timestamp_text

# java.sql.Types codes whose Canal value is raw bytes carried as an ISO-8859-1 string.
BINARY_SQL_TYPES = {-2, -3, -4, 2004}
_SQLTYPE_LOGICAL = {
    -7: "bit",
    -6: "int8",
    5: "int16",
    4: "int32",
    -5: "int64",
    7: "float32",
    6: "float64",
    8: "float64",
    3: "decimal(65,30)",
    2: "decimal(65,30)",
    1: "string",
    12: "string",
    -1: "string",
    2005: "string",
    91: "date",
    92: "time",
    93: "datetime",
    -2: "binary",
    -3: "binary",
    -4: "binary",
    2004: "binary",
    16: "bool",
}


_BARE_DECIMAL = re.compile(r"^\s*(decimal|numeric)(\s+unsigned)?\s*$", re.I)


def canal_logical_type(mysql_type: str | None, sql_type: int | None) -> str:
    if mysql_type and _BARE_DECIMAL.match(mysql_type):
        # TiCDC's Canal JSON names the type without precision and scale: a DECIMAL of unknown
        # scale, kept as its exact text (reading it as DECIMAL(10,0) would round the values)
        return "decimal(65,30)"
    lt = mysql_logical_type(mysql_type)
    if lt == "unknown" and sql_type is not None:
        lt = _SQLTYPE_LOGICAL.get(sql_type, "unknown")
    if sql_type in BINARY_SQL_TYPES and lt in ("string", "unknown", "json"):
        # VARCHAR ... BINARY / *BINARY columns: canal sends bytes as ISO-8859-1 text
        lt = "binary"
    return lt


def canal_value(text: str | None, logical: str) -> str | None:
    if text is None:
        return None
    if logical == "binary":
        try:
            return b64(text.encode("latin-1"))
        except UnicodeEncodeError:
            # not ISO-8859-1 text: the producer already decoded it as characters; keep UTF-8
            return b64(text.encode("utf-8"))
    if logical == "datetime":
        return normalize_datetime_text(text)
    if logical == "timestamp":
        # Canal renders TIMESTAMP in its server's zone, which the message does not state;
        # it is read as UTC (say so in the pipeline's docs if your Canal runs elsewhere).
        return parse_timestamp_text(text) or text
    return text
