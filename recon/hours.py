"""Pipeline hours: the `YYYY-MM-DDTHH` notation users type and the folders it maps to."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from recon.errors import ConfigError

_HOUR_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2})$")


def parse_hour(text: str, what: str = "hour") -> datetime:
    """Parse `YYYY-MM-DDTHH` (UTC) into an aware datetime at the top of that hour."""
    m = _HOUR_RE.match(text.strip())
    if not m:
        raise ConfigError(
            f"{what} {text!r} is not an hour; write it as YYYY-MM-DDTHH, e.g. 2026-11-20T05"
        )
    try:
        return datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), tzinfo=UTC)
    except ValueError as err:
        raise ConfigError(
            f"{what} {text!r} is not a valid hour ({err}); write YYYY-MM-DDTHH"
        ) from None


def format_hour(hour: datetime) -> str:
    return hour.astimezone(UTC).strftime("%Y-%m-%dT%H")


def hour_range(first: datetime, last: datetime) -> list[datetime]:
    """Every hour from `first` to `last` inclusive."""
    if last < first:
        raise ConfigError(
            f"--to {format_hour(last)} is before --from {format_hour(first)}; swap them"
        )
    out = []
    h = first
    while h <= last:
        out.append(h)
        h += timedelta(hours=1)
    return out


def dump_partition(hour: datetime) -> tuple[str, str]:
    """The `dt=` and `hour=` folder values of the raw dump layout (contract 2.1)."""
    h = hour.astimezone(UTC)
    return h.strftime("%Y-%m-%d"), h.strftime("%H")


def hour_end_ms(hour: datetime) -> int:
    return int((hour + timedelta(hours=1)).timestamp() * 1000)
