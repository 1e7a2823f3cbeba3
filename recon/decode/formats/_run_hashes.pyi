"""The C module `_run_hashes.c` (built by `make setup`)."""

from typing import Any

def hashes(keys: Any, values: Any, seed: int) -> bytes:
    """Spark's `xxhash64(key, value)` of each row (lists of bytes or None, or
    `BinaryRows.native`), as native uint64s."""
