"""The C module `_debezium_lane.c` (built by `make setup`)."""

from typing import Any

def read(
    value: bytes, start: int, spec: tuple[Any, ...]
) -> tuple[str, dict[str, Any], Any, Any, Any] | None:
    """`DebeziumLane.read`'s payload of one Kafka value, or None: left to the Python read."""
