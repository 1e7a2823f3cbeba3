"""The decoder's answer to one record, as the reference the C reads are held to: the record
fed alone to a fresh decoder, as the stream driver feeds it, and its events in the lane's form."""

from __future__ import annotations

import dataclasses
from typing import Any

from recon.core.model import Event, RawRecord
from recon.decode.base import StreamDecoder
from recon.decode.lane import LANE_COLUMNS


def fed_alone(dec: StreamDecoder, rec: RawRecord) -> bool:
    """Feed a copy of `rec` to `dec`; False when the stream driver would quarantine it (the
    decoder raised, or set it aside)."""
    try:
        dec.feed(dataclasses.replace(rec))
    except Exception:  # noqa: BLE001 - the stream driver quarantines the record
        return False
    return not dec.sink.quarantine


def lane_row(ev: Event) -> tuple[Any, ...]:
    """An event's row as a lane writes it (`LANE_COLUMNS`)."""
    return tuple(getattr(ev, c) for c in LANE_COLUMNS)


def lane_image(image: dict[str, Any] | None) -> Any:
    """An event's image as a lane reads it: (its column names, their values)."""
    return None if image is None else (tuple(image), list(image.values()))
