"""The C module `_dataworks_lane.c` (built by `make setup`)."""

from collections.abc import Sequence
from typing import Any

def read(
    value: bytes, start: int, spec: tuple[Any, ...], topic: str, partition: int, offset: int
) -> tuple[str, tuple[Any, ...], str, Any, Any] | None:
    """`DataworksLane.read`'s answer of a record, or None: left to the Python read."""

def run(
    values: Any, offsets: Sequence[int], start: int, end: int, budget: int,
    recent: list[tuple[bytes, tuple[Any, ...] | None]], topic: str, partition: int,
    sink: tuple[Any, ...], kinds: tuple[str, str, str],
) -> tuple[int, int, int]:  # fmt: skip
    """`DataworksLane.take` of a run's records: (where it stopped, consumed, pairs joined)."""
