"""The C module `_dataworks_lane.c` (built by `make setup`)."""

from typing import Any

def read(
    value: bytes, start: int, spec: tuple[Any, ...], topic: str, partition: int, offset: int
) -> tuple[str, tuple[Any, ...], str, Any, Any] | None:
    """`DataworksLane.read`'s answer of a record, or None: left to the Python read."""
