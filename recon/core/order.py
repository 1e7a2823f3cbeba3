"""Order keys: bytes that sort in source order (contract 5.1).

Each component is fixed-width big-endian, so unsigned lexicographic byte comparison (Python's
`bytes` ordering, Spark's `binary` ordering) equals component-wise numeric comparison. Kafka
(partition, offset) is appended last everywhere as the final tie-break.
"""

from __future__ import annotations

import functools

_U64 = (1 << 64) - 1
_U128 = (1 << 128) - 1


# clamped to the width; the common in-range number skips the clamp's two calls (these run a few
# times per decoded event)
def u32(n: int) -> bytes:
    if 0 <= n <= 0xFFFFFFFF:
        return n.to_bytes(4, "big")
    return (0 if n < 0 else 0xFFFFFFFF).to_bytes(4, "big")


def u64(n: int) -> bytes:
    if 0 <= n <= _U64:
        return n.to_bytes(8, "big")
    return (0 if n < 0 else _U64).to_bytes(8, "big")


def u128(n: int) -> bytes:
    if 0 <= n <= _U128:
        return n.to_bytes(16, "big")
    return (0 if n < 0 else _U128).to_bytes(16, "big")


@functools.lru_cache(maxsize=1024)  # a partition's events name the same few binlog files
def binlog_file_number(name: str | None) -> int:
    """`mysql-bin.000003` -> 3. Binlog files of one server differ only in that suffix."""
    if not name:
        return 0
    i = len(name)  # the trailing digits, found from the end: a regex search for them was
    while i and name[i - 1].isdecimal():  # quadratic in a long run of digits (20k: 5 s)
        i -= 1
    if len(name) - i > 20:  # beyond 64 bits, and maybe past int()'s 4,300 digits: the order
        return _U64 + 1  # key clamps it to 64 bits, as the lanes' C reads do
    return int(name[i:]) if i < len(name) else 0


def kafka_tail(partition: int, offset: int) -> bytes:
    if 0 <= partition <= 0xFFFFFFFF and 0 <= offset <= _U64:  # every record's: no calls
        return partition.to_bytes(4, "big") + offset.to_bytes(8, "big")
    return u32(partition) + u64(offset)


def binlog_key(file: str | None, pos: int | None, row: int, partition: int, offset: int) -> bytes:
    n, p = binlog_file_number(file), pos or 0
    if 0 <= n <= _U64 and 0 <= p <= _U64 and 0 <= row <= 0xFFFFFFFF:  # no clamp: no calls
        head = n.to_bytes(8, "big") + p.to_bytes(8, "big") + row.to_bytes(4, "big")
    else:
        head = u64(n) + u64(p) + u32(row)
    return head + kafka_tail(partition, offset)


def gtid_number(gtid: str | None) -> int:
    """The transaction number of one GTID: `uuid:N` (or MySQL 8.4's `uuid:tag:N`) -> N, MariaDB
    `domain-server-seq` -> seq.

    GTIDs of different MySQL server UUIDs (or MariaDB domains) are not ordered relative to each
    other (formats.md 2.3); comparing their numbers is the best a batch job can do, and changes to
    one key normally come from one server.
    """
    if not gtid:
        return 0
    g = gtid.strip()
    if ":" in g:
        tail = g.rsplit(":", 1)[1]
        return int(tail) if tail.isdigit() else 0
    parts = g.split("-")
    if len(parts) == 3 and parts[2].isdigit():
        return int(parts[2])
    return 0


def decimal_text_number(text: str | None) -> int | None:
    """A sequence number given as decimal text, compared as a number (never as a string)."""
    if text is None:
        return None
    t = str(text).strip()
    return int(t) if t.isdigit() else None
