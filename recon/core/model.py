"""The canonical change event every decoder produces, whatever the wire format.

One schema for all six formats (issue 2, contract 4/5.1):
- `db`, `tbl`: the source table; `op`: insert | update | delete | snapshot | ddl.
- `pk`: primary-key column names as the message states them (empty when it states none).
- `before` / `after`: column -> canonical text value (None is SQL NULL), in source column order.
  `types`: column -> logical type (see `recon.core.values`); `defaults`: column -> the value a
  row that predates the column reads, where the message states it (Debezium's schema `default`). Together they lose nothing: integers are
  exact decimal text, DECIMAL keeps its scale, binary is base64, temporal values are ISO text.
- `order_key`: bytes that compare (unsigned, lexicographically) in source order. Its layout is
  per format (see `recon.core.order`); within one pipeline all keys share one layout, and an
  out-of-band snapshot row has the empty key, which sorts first.
- source position: `gtid`, `binlog_file`, `binlog_pos`, `seq` (Tencent seqId / DataWorks
  sequenceId as decimal text), `event_index` (row within its raw record), `txn_id`,
  `event_time_ms` (source change time, never processing time where the format has both).
- raw record coordinates: `topic`, `partition`, `offset` (the first record of a reassembled
  group).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

import pyarrow as pa

from recon.errors import DecodeError

Op = Literal["insert", "update", "delete", "snapshot", "ddl"]
OPS: tuple[str, ...] = get_args(Op)

_MAP = pa.map_(pa.string(), pa.string())

EVENT_FIELDS: list[pa.Field] = [
    pa.field("db", pa.string()),
    pa.field("tbl", pa.string()),
    pa.field("op", pa.string()),
    pa.field("pk", pa.list_(pa.string())),
    pa.field("before", _MAP),
    pa.field("after", _MAP),
    pa.field("types", _MAP),
    pa.field("order_key", pa.binary()),
    pa.field("gtid", pa.string()),
    pa.field("binlog_file", pa.string()),
    pa.field("binlog_pos", pa.int64()),
    pa.field("seq", pa.string()),
    pa.field("event_index", pa.int64()),
    pa.field("txn_id", pa.string()),
    pa.field("event_time_ms", pa.int64()),
    pa.field("ddl", pa.string()),
    pa.field("defaults", _MAP),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
]
EVENT_SCHEMA = pa.schema(EVENT_FIELDS)
EVENT_COLUMNS = [f.name for f in EVENT_FIELDS]

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

# The raw record as the decode stream sees it (see recon.decode.stage for how it is read).
RAW_FIELDS: list[pa.Field] = [
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("ts_ms", pa.int64()),
    pa.field("headers", HEADER_TYPE),
    pa.field("carried", pa.bool_()),
    pa.field("skip", pa.int32()),
]
RAW_SCHEMA = pa.schema(RAW_FIELDS)

# mapInArrow returns one schema, so the decode stream writes one union row kind per output:
# kind = event | quarantine | carry | stat | pairable | shape (`recon.decode.stream`).
OUTPUT_SCHEMA = pa.schema(
    [pa.field("kind", pa.string())]
    + EVENT_FIELDS
    + [
        pa.field("reason", pa.string()),
        pa.field("raw_key", pa.binary()),
        pa.field("raw_value", pa.binary()),
        pa.field("raw_ts_ms", pa.int64()),
        pa.field("raw_headers", HEADER_TYPE),
        pa.field("skip", pa.int32()),
        pa.field("stat", pa.string()),
        pa.field("n", pa.int64()),
    ]
)

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def i64(n: int, what: str) -> int:
    """`n` for a 64-bit column (`binlog_pos`, `event_index`, `event_time_ms`), or DecodeError:
    a number a producer wrote beyond that range quarantines its record instead of failing the
    whole decode task when the batch is built."""
    if type(n) is bool:  # an int to Python, not to the Arrow column: the task's batch would fail
        raise DecodeError(f"{what} {str(n).lower()} is not a number")
    if _I64_MIN <= n <= _I64_MAX:
        return n
    raise DecodeError(f"{what} {n} is beyond the signed 64-bit range")


@dataclass(slots=True)
class Event:
    """One canonical change (see module docstring)."""

    db: str
    tbl: str
    op: Op
    pk: list[str] = field(default_factory=list)
    before: dict[str, str | None] | None = None
    after: dict[str, str | None] | None = None
    types: dict[str, str] = field(default_factory=dict)
    order_key: bytes = b""
    gtid: str | None = None
    binlog_file: str | None = None
    binlog_pos: int | None = None
    seq: str | None = None
    event_index: int = 0
    txn_id: str | None = None
    event_time_ms: int | None = None
    ddl: str | None = None
    defaults: dict[str, str] | None = None
    topic: str = ""
    partition: int = 0
    offset: int = 0

    def as_row(self) -> dict[str, object]:
        return {
            "db": self.db,
            "tbl": self.tbl,
            "op": self.op,
            "pk": list(self.pk),
            "before": None if self.before is None else list(self.before.items()),
            "after": None if self.after is None else list(self.after.items()),
            "types": list(self.types.items()),
            "order_key": self.order_key,
            "gtid": self.gtid,
            "binlog_file": self.binlog_file,
            "binlog_pos": self.binlog_pos,
            "seq": self.seq,
            "event_index": self.event_index,
            "txn_id": self.txn_id,
            "event_time_ms": self.event_time_ms,
            "ddl": self.ddl,
            "defaults": None if self.defaults is None else list(self.defaults.items()),
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
        }


@dataclass(slots=True)
class RawRecord:
    """One Kafka record from the dump (contract 2.1), plus carry-over bookkeeping."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    ts_ms: int | None = None
    headers: list[dict[str, object]] | None = None
    carried: bool = False
    skip: int = 0
