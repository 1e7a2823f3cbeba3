"""The C module `_dataworks_lane.c` (built by `make setup`)."""

from typing import Any

def read(value: bytes, start: int, spec: tuple[Any, ...]) -> tuple[str, Any, Any, Any, Any] | None:
    """`DataworksLane.read`'s message after its schema, or None: left to the Python read."""
