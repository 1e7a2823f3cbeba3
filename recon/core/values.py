"""Logical column types and the canonical text of values (lossless, format-independent).

Logical types: int8 int16 int32 int64 uint8 uint16 uint32 uint64 decimal(p,s) float32 float64
bool bit string json enum set binary date datetime timestamp time year, and `unknown` where a
message carries no type (TDSQL without DDL): its text stays as the message wrote it.

Canonical text: integers in decimal; DECIMAL exactly as the source wrote it (plain, scale kept);
floats as the shortest round-trip text; bool `true`/`false`; binary as standard base64; DATE
`YYYY-MM-DD`; DATETIME `YYYY-MM-DD HH:MM:SS[.ffffff]`; TIMESTAMP `YYYY-MM-DDTHH:MM:SS[.ffffff]Z`
(UTC); TIME `[-]HH:MM:SS[.ffffff]`.
"""

from __future__ import annotations

import base64
import functools
import re
from datetime import UTC, date, datetime, timedelta

from recon.errors import DecodeError

_EPOCH_DATE = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1)

_TYPE_RE = re.compile(r"^\s*([a-zA-Z]+)\s*(?:\(([^)]*)\))?\s*(.*)$")

_INT_NAMES = {
    "tinyint": "int8",
    "smallint": "int16",
    "mediumint": "int32",
    "int": "int32",
    "integer": "int32",
    "bigint": "int64",
}
_UNSIGNED = {"int8": "uint8", "int16": "uint16", "int32": "uint32", "int64": "uint64"}

# logical types whose values are whole numbers (exported as JSON integers, compared as such)
INTEGER_LOGICAL = frozenset(
    {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "year"}
)


_BINARY_NAMES = (
    "binary varbinary blob tinyblob mediumblob longblob geometry point linestring polygon "
    "multipoint multilinestring multipolygon geometrycollection"
).split()
_TEXT_NAMES = "char varchar text tinytext mediumtext longtext nchar nvarchar".split()
# MySQL type names whose logical type needs no length or sign
_SIMPLE_TYPES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "real": "float64",
    "bool": "int8",
    "boolean": "int8",
    **{n: "string" for n in _TEXT_NAMES},
    **{n: "binary" for n in _BINARY_NAMES},
    **{n: n for n in ("bit", "json", "enum", "set", "date", "datetime", "timestamp", "time")},
    "year": "year",
}


@functools.lru_cache(maxsize=4096)  # a decoder asks for the same few types per message
def mysql_logical_type(mysql_type: str | None) -> str:
    """Logical type of a MySQL column type text, e.g. `int(11) unsigned` -> uint32."""
    if not mysql_type:
        return "unknown"
    m = _TYPE_RE.match(mysql_type.lower())
    if not m:
        return "unknown"
    name, args, rest = m.group(1), m.group(2), m.group(3)
    unsigned = "unsigned" in rest or "zerofill" in rest
    if name in _INT_NAMES:
        t = _INT_NAMES[name]
        if name == "mediumint" and unsigned:
            return "uint32"
        return _UNSIGNED[t] if unsigned else t
    if name in ("decimal", "numeric", "dec", "fixed"):
        p, s = 10, 0
        if args:
            bits = [a.strip() for a in args.split(",")]
            p = int(bits[0]) if bits[0].isdigit() else 10
            s = int(bits[1]) if len(bits) > 1 and bits[1].isdigit() else 0
        return f"decimal({p},{s})"
    return _SIMPLE_TYPES.get(name, "unknown")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def date_text(d: date) -> str:
    """`YYYY-MM-DD` with a four-digit year: years 1-999 too (`0999-01-02`), which MariaDB
    allows and `strftime("%Y")` does not pad on every platform."""
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def datetime_text(dt: datetime, sep: str = " ") -> str:
    """`YYYY-MM-DD HH:MM:SS[.ffffff]` (four-digit year, fraction only when non-zero)."""
    return f"{date_text(dt)}{sep}{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}" + _frac(
        dt.microsecond
    )


def date_from_days(days: int) -> str:
    return _date_from_days(int(days))


@functools.lru_cache(maxsize=4096)
def _date_from_days(days: int) -> str:
    return date_text(_EPOCH_DATE + timedelta(days=days))


def _frac(us: int) -> str:
    return f".{us:06d}" if us else ""


def datetime_from_epoch_us(us: int) -> str:
    """Zone-less DATETIME from micro-seconds since 1970-01-01 00:00 (Debezium MicroTimestamp)."""
    return _datetime_from_epoch_us(int(us))


@functools.lru_cache(maxsize=4096)
def _datetime_from_epoch_us(us: int) -> str:
    """Cached: a change's temporal values repeat across the rows of a second, and formatting
    one cost a tenth of a Debezium record's decode."""
    return datetime_text(_EPOCH + timedelta(microseconds=us))


def datetime_from_epoch_ms(ms: int) -> str:
    return datetime_from_epoch_us(int(ms) * 1000)


def time_from_us(us: int) -> str:
    us = int(us)
    sign = "-" if us < 0 else ""
    us = abs(us)
    secs, frac = divmod(us, 1_000_000)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return f"{sign}{h:02d}:{m:02d}:{s:02d}{_frac(frac)}"


def timestamp_utc(dt: datetime) -> str:
    return datetime_text(dt.astimezone(UTC), "T") + "Z"


_TS_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\s*(Z|[+-]\d{2}:?\d{2})?$"
)


def parse_timestamp_text(text: str, default_utc: bool = True) -> str | None:
    """`2021-05-17 07:22:42 +00:00`, `2018-06-20T13:37:03Z`, ... -> canonical UTC text.

    Returns None when the text is not a timestamp (the caller keeps the raw text).
    A zero timestamp (`0000-00-00 00:00:00`) is returned as-is by the caller.
    """
    m = _TS_RE.match(text.strip())
    if not m:
        return None
    frac = (m.group(7) or "").ljust(6, "0")[:6]
    try:
        dt = datetime(
            int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]), int(frac or 0)
        )
    except ValueError:
        return None
    zone = m.group(8)
    if zone and zone != "Z":
        z = zone.replace(":", "")
        sign = 1 if z[0] == "+" else -1
        delta = timedelta(hours=int(z[1:3]), minutes=int(z[3:5])) * sign
        dt = dt - delta
    elif not zone and not default_utc:
        return None
    return datetime_text(dt, "T") + "Z"


def normalize_datetime_text(text: str) -> str:
    """`2020-07-17T18:00:22.123` -> `2020-07-17 18:00:22.123000`; other text unchanged."""
    if len(text) == 19 and text[10] == " ":
        # canonical already when it matches (its groups give it back), unchanged when not:
        # the common MySQL DATETIME text returns without the regex (a tenth of a decode)
        return text
    m = _TS_RE.match(text.strip())
    if not m or m.group(8):
        return text
    frac = (m.group(7) or "").ljust(6, "0")[:6]
    base = f"{m[1]}-{m[2]}-{m[3]} {m[4]}:{m[5]}:{m[6]}"
    return base + (f".{frac}" if frac and int(frac) else "")


def decimal_from_twos_complement(data: bytes, scale: int) -> str:
    """Kafka Connect Decimal: big-endian two's-complement unscaled integer plus a scale."""
    n = int.from_bytes(data, "big", signed=True) if data else 0
    return scale_text(n, scale)


MAX_SCALE = 100
"""MySQL's DECIMAL has at most 30 digits after the point (65 in all): a producer's scale far
beyond that is damage, and writing it out would take time and memory in proportion."""


def scale_text(unscaled: int, scale: int) -> str:
    if abs(scale) > MAX_SCALE:
        raise DecodeError(f"decimal scale {scale} is out of range (at most {MAX_SCALE})")
    if scale <= 0:
        return str(unscaled * (10 ** (-scale)))
    sign = "-" if unscaled < 0 else ""
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}"


def float_text(v: float) -> str:
    return repr(float(v))


def number_text(v: object) -> str:
    """JSON number -> canonical text (ints exact; floats shortest round-trip)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return float_text(v)
    return str(v)
