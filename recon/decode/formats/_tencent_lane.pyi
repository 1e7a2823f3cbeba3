"""The C module `_tencent_lane.c` (built by `make setup`)."""

from collections.abc import Callable, Sequence
from typing import Any

def read(
    value: bytes | None,
    last_seq: int,
    spec_for: Callable[[bytes, str, str], Any],
    topic: str,
    partition: int,
    offset: int,
) -> tuple[int, list[tuple[Any, ...]]] | None:
    """`TencentLane.read` of one Kafka value, or None: left to the Python read."""

def run(
    values: Any, offsets: Sequence[int], start: int, end: int, budget: int, last_seq: int,
    spec_for: Callable[[bytes, str, str], Any], topic: str, partition: int,
    sink: tuple[Any, ...],
) -> tuple[int, int]:  # fmt: skip
    """`TencentLane.take` of a run's records: (where it stopped, the last seqId then)."""
