"""The C module `_debezium_lane.c` (built by `make setup`)."""

from collections.abc import Callable, Sequence
from typing import Any

from recon.core.model import Op
from recon.decode.lane import Image

def read(
    value: bytes,
    start: int,
    spec: tuple[Any, ...],
    key: bytes | None,
    primary_keys: dict[str, list[str]],
    shared_key: Callable[[Any], list[str]],
    topic: str,
    partition: int,
    offset: int,
) -> tuple[Op, tuple[Any, ...], Image | None, Image | None] | None:
    """`DebeziumLane.read`'s answer of one record, or None: left to the Python read."""

def run(
    values: Any, keys: Sequence[bytes | None], offsets: Sequence[int], start: int, end: int,
    budget: int, recent: list[tuple[bytes, tuple[Any, ...] | None]],
    primary_keys: dict[str, list[str]], shared_key: Callable[[Any], list[str]], topic: str,
    partition: int, sink: tuple[Any, ...],
) -> tuple[int, int, int]:  # fmt: skip
    """`DebeziumLane.take` of a run's records: (where it stopped, records consumed, of them
    tombstones)."""
