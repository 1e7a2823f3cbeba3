"""Pipeline hours: the `YYYY-MM-DDTHH` notation users type and the folders it maps to."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta

from recon.errors import ConfigError
from recon.layout import hour_text

log = logging.getLogger(__name__)
_HOUR_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2})$")
# an hour, or an ISO datetime as Airflow shows a logical date: 2026-11-20T05:00:00+00:00, ...Z
HOUR_INPUT_PATTERN = (
    r"^\d{4}-\d{2}-\d{2}T\d{2}$"
    r"|^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}(:?\d{2})?)?$"
)
"""What `parse_hour` accepts, as a JSON Schema pattern (the DAGs' trigger form)."""
_ISO_RE = re.compile(HOUR_INPUT_PATTERN)


def parse_hour(text: str, what: str = "hour") -> datetime:
    """`YYYY-MM-DDTHH` (UTC), or an ISO datetime (`2026-11-20T05:00:00+00:00`, `...Z`, a
    space for the T; no zone is UTC), as an aware datetime at the top of its hour. An ISO
    datetime is logged with the hour it was taken as (after the zone, down to the hour)."""
    t = text.strip()
    m = _HOUR_RE.match(t)
    if m:
        try:
            return datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), tzinfo=UTC)
        except ValueError as err:
            raise ConfigError(
                f"{what} {text!r} is not a valid hour ({err}); write YYYY-MM-DDTHH"
            ) from None
    if not _ISO_RE.match(t):
        raise ConfigError(
            f"{what} {text!r} is not an hour; write it as YYYY-MM-DDTHH (e.g. 2026-11-20T05) "
            "or an ISO datetime (e.g. 2026-11-20T05:00:00+00:00)"
        )
    dt = _utc(t, text, what)
    hour = dt.replace(minute=0, second=0, microsecond=0)
    log.info("%s %s taken as hour %s (UTC)", what, text, format_hour(hour))
    return hour


_TIME_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}(:?\d{2})?)?$"
)


def parse_time(text: str, what: str) -> datetime:
    """`YYYY-MM-DDTHH:MM:SS[.ffffff]` (UTC; or with a zone, `Z` or `+02:00`), as an aware
    datetime in UTC: a source commit time (`recon export --as-of-time`)."""
    t = text.strip()
    if not _TIME_RE.match(t):
        raise ConfigError(
            f"{what} {text!r} is not a time; write it as YYYY-MM-DDTHH:MM:SS[.ffffff] in UTC "
            "(e.g. 2026-11-20T10:42:00)"
        )
    return _utc(t, text, what)


def _utc(t: str, text: str, what: str) -> datetime:
    """ISO time `t` (as typed: `text`) in UTC; no zone is UTC."""
    try:
        dt = datetime.fromisoformat(t)
    except ValueError as err:
        raise ConfigError(f"{what} {text!r} is not a valid time ({err})") from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).astimezone(UTC)


def format_hour(hour: datetime) -> str:
    """`YYYY-MM-DDTHH` (UTC): the one notation, owned by `recon.layout.hour_text`."""
    return hour_text(hour)


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


def hour_end_ms(hour: datetime) -> int:
    return int((hour + timedelta(hours=1)).timestamp() * 1000)


def retention_cutoff(newest: datetime, keep_hours: int) -> datetime:
    """The oldest hour a window of `keep_hours` ending with `newest` keeps (`recon expire`,
    `retention_hours`): what is older is pruned, and a delete older than it is forgotten."""
    return newest - timedelta(hours=keep_hours - 1)
