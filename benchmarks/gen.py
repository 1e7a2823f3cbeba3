"""A fast, vectorised generator of one hour of CDC messages for the speed benchmark.

Every message of a format comes from a handful of templates (one per kind of message: insert,
update, delete, ...) serialized once with placeholder values of a fixed width; the values of
millions of messages are then written into copies of the template with numpy (digits,
base64, protobuf varints of a fixed length), so a million messages take about a second and no
Python loop runs per message.

The workload: `changes` row changes to random keys of one table `shop.orders` (six columns:
id, customer, amount DECIMAL(10,2), status, updated_at DATETIME, note VARBINARY) in a key space
of `keys`; a key's first change inserts it, later ones update it, and the last change of a
key changed more than once deletes it with probability `delete_share`. Messages go to
`partitions` Kafka partitions by key (each partition in source order), written as Parquet in
Spark's Kafka source schema under `<raw>/<topic>/dt=.../hour=.../part-*.parquet` + `_SUCCESS`.

The expected table follows from the plan alone (`expected_rows`), so the runner can check
recon's and the naive job's row counts against it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from recon.decode.input.dumps import KAFKA_PARQUET_SCHEMA

INSERT, UPDATE, DELETE = 0, 1, 2
KEY0 = 1_000_000  # ids are 7 digits: 1_000_000 + key
STATUSES = np.frombuffer(b"openpaidsentdone", np.uint8).reshape(4, 4)
SERVER_UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


@dataclass
class Plan:
    """Per change: key, op, index of the key's previous change (-1), the after-image's values
    (amount in cents, status index, note bytes), time, partition and rank in the partition."""

    hour: datetime
    key: np.ndarray
    op: np.ndarray
    prev: np.ndarray
    amount: np.ndarray
    status: np.ndarray
    note: np.ndarray
    ts_ms: np.ndarray
    partition: np.ndarray

    @property
    def n(self) -> int:
        return len(self.key)

    def expected_rows(self) -> int:
        """Rows of the table after the hour: keys whose last change is not a delete."""
        last = np.zeros(self.key.max() + 1 if self.n else 0, dtype=np.int8) - 1
        last[self.key] = self.op  # numpy assigns in order: the last change of each key wins
        return int(np.count_nonzero((last >= 0) & (last != DELETE)))


SHAPES = ("hot", "zipf", "distinct")
"""How an hour's changes fall on keys (`plan`'s `shape`): `hot`, uniformly over `keys` keys (the
2M-message hour changes each of 100k keys ~20 times); `zipf`, ~1.3 changes per key: a key per
change for 1/1.3 of them and the rest Zipf-skewed updates of those keys (a few hot keys, most
changed once: an OLTP table's hour); `distinct`, each key changed once (insert-only: orders,
events, logs)."""


def plan_keys(rng: np.random.Generator, changes: int, keys: int, shape: str) -> np.ndarray:
    """Each change's key, by `shape` (`SHAPES`)."""
    if shape == "distinct":
        return rng.permutation(changes).astype(np.int64)
    if shape == "zipf":
        fresh = max(1, round(changes / 1.3))
        ranks = rng.zipf(1.2, changes - fresh) - 1
        hot = np.where(ranks < fresh, ranks, rng.integers(0, fresh, len(ranks)))
        return rng.permutation(np.r_[np.arange(fresh), hot]).astype(np.int64)
    return rng.integers(0, keys, changes, dtype=np.int64)


def plan(
    hour: datetime,
    changes: int,
    keys: int,
    delete_share: float = 0.1,
    partitions: int = 2,
    seed: int = 1,
    shape: str = "hot",
) -> Plan:
    rng = np.random.default_rng(seed)
    key = plan_keys(rng, changes, keys, shape)
    order = np.argsort(key, kind="stable")
    ks = key[order]
    first = np.r_[True, ks[1:] != ks[:-1]] if changes else np.zeros(0, bool)
    last = np.r_[ks[1:] != ks[:-1], True] if changes else np.zeros(0, bool)
    prev_sorted = np.r_[-1, order[:-1]] if changes else np.zeros(0, np.int64)
    prev_sorted[first] = -1
    prev = np.empty(changes, np.int64)
    prev[order] = prev_sorted
    op = np.full(changes, UPDATE, np.int8)
    op[order[first]] = INSERT
    may_delete = order[last & ~first]
    op[may_delete[rng.random(len(may_delete)) < delete_share]] = DELETE
    base = int(hour.timestamp() * 1000)
    return Plan(
        hour=hour,
        key=key,
        op=op,
        prev=prev,
        amount=rng.integers(1_000_000, 8_000_000, changes, dtype=np.int64),
        status=np.where(op == INSERT, 0, rng.integers(1, 4, changes)).astype(np.int8),
        note=rng.integers(0, 256, (changes, 4), dtype=np.uint8),
        ts_ms=base + np.arange(changes, dtype=np.int64) * 3_599_000 // max(changes, 1),
        partition=(key % partitions).astype(np.int32),
    )


# ---- fixed-width renderings (n values -> an (n, width) uint8 matrix) ----


def digits(v: np.ndarray, width: int) -> np.ndarray:
    x = np.asarray(v, np.int64).copy()
    out = np.empty((len(x), width), np.uint8)
    for j in range(width - 1, -1, -1):
        out[:, j] = 48 + x % 10
        x //= 10
    if (x != 0).any():
        raise ValueError(f"a value does not fit in {width} digits")
    return out


_B64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8)


def b64(raw: np.ndarray) -> np.ndarray:
    """Standard base64 (with padding) of an (n, m) byte matrix."""
    n, m = raw.shape
    pad = (-m) % 3
    b = np.concatenate([raw, np.zeros((n, pad), np.uint8)], axis=1).astype(np.uint32)
    b = b.reshape(n, -1, 3)
    w = (b[:, :, 0] << 16) | (b[:, :, 1] << 8) | b[:, :, 2]
    idx = np.stack([(w >> 18) & 63, (w >> 12) & 63, (w >> 6) & 63, w & 63], axis=2)
    out = _B64[idx.reshape(n, -1)]
    if pad:
        out[:, -pad:] = ord("=")
    return out


def varint5(v: np.ndarray) -> np.ndarray:
    """Protobuf varints of exactly five bytes (values in [2**28, 2**35))."""
    x = np.asarray(v, np.int64)
    if len(x) and (x.min() < 2**28 or x.max() >= 2**35):
        raise ValueError("a varint slot value is out of [2**28, 2**35)")
    out = np.empty((len(x), 5), np.uint8)
    for j in range(5):
        out[:, j] = ((x >> (7 * j)) & 0x7F) | (0x80 if j < 4 else 0)
    return out


def const(text: bytes, n: int) -> np.ndarray:
    return np.tile(np.frombuffer(text, np.uint8), (n, 1))


def join(*parts: np.ndarray) -> np.ndarray:
    return np.concatenate(parts, axis=1)


def sbytes(a: np.ndarray) -> np.ndarray:
    """Signed big-endian 3-byte two's complement of values below 2**23 (a Decimal's unscaled)."""
    x = np.asarray(a, np.int64)
    return np.stack([(x >> 16) & 255, (x >> 8) & 255, x & 255], axis=1).astype(np.uint8)


# ---- templates ----


@dataclass
class Template:
    """Bytes with fixed-width slots: name -> positions (a slot may occur more than once)."""

    data: bytes
    slots: dict[str, list[int]]
    widths: dict[str, int]

    def fill(self, values: dict[str, np.ndarray], n: int) -> np.ndarray:
        out = np.tile(np.frombuffer(self.data, np.uint8), (n, 1))
        for name, positions in self.slots.items():
            v = values[name]
            if v.shape != (n, self.widths[name]):
                raise ValueError(f"slot {name}: {v.shape} for width {self.widths[name]}")
            for p in positions:
                out[:, p : p + v.shape[1]] = v
        return out


_TOKEN = re.compile(rb'("?)@@(#?)([a-z_]+):(\d+)@@("?)')


def json_template(doc: Any) -> Template:
    """A JSON template from a document whose slot values are `@@name:width@@` (that many
    characters, in a JSON string or inside one) or `@@#name:width@@` (the whole string stands
    for a bare number: its quotes go)."""
    text = orjson.dumps(doc)
    out, last = bytearray(), 0
    slots: dict[str, list[int]] = {}
    widths: dict[str, int] = {}
    for m in _TOKEN.finditer(text):
        out += text[last : m.start()]
        bare, name, width = m.group(2) == b"#", m.group(3).decode(), int(m.group(4))
        if bare and not (m.group(1) and m.group(5)):
            raise ValueError(f"number slot {name} must be the whole JSON string")
        if not bare:
            out += m.group(1)
        slots.setdefault(name, []).append(len(out))
        widths[name] = width
        out += b"?" * width
        if not bare:
            out += m.group(5)
        last = m.end()
    out += text[last:]
    return Template(bytes(out), slots, widths)


def marker_template(data: bytes, markers: dict[str, bytes]) -> Template:
    """A template from serialized bytes holding each slot's distinct marker bytes."""
    slots: dict[str, list[int]] = {}
    for name, mark in markers.items():
        pos = [m.start() for m in re.finditer(re.escape(mark), data)]
        if not pos:
            raise ValueError(f"marker of slot {name} not found")
        slots[name] = pos
    return Template(data, slots, {k: len(v) for k, v in markers.items()})


def to_binary(mat: np.ndarray) -> pa.Array:
    n, width = mat.shape
    fixed = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(width), n, [None, pa.py_buffer(np.ascontiguousarray(mat))]
    )
    return fixed.cast(pa.binary())


# ---- writing an hour ----


@dataclass
class Message:
    """One kind of message a change may produce: its template and how to fill it."""

    ops: tuple[int, ...]
    template: Template | None  # None: a null value (Debezium's tombstone)
    values: Callable[[Plan, np.ndarray, np.ndarray], dict[str, np.ndarray]]
    key: Callable[[Plan, np.ndarray], np.ndarray] | None = None


def messages_per_change(kinds: list[Message], op: np.ndarray) -> np.ndarray:
    return sum((np.isin(op, k.ops).astype(np.int64) for k in kinds), np.zeros(len(op), np.int64))


def cut_to_messages(p: Plan, kinds: list[Message], messages: int) -> Plan:
    """The plan's first changes whose messages number at most `messages`."""
    per = np.cumsum(messages_per_change(kinds, p.op))
    n = int(np.searchsorted(per, messages, side="right"))
    fields = {f: getattr(p, f)[:n] for f in ("key", "op", "amount", "status", "note", "ts_ms")}
    prev = p.prev[:n]
    return Plan(p.hour, prev=prev, partition=p.partition[:n], **fields)


def write_hour(
    p: Plan,
    kinds: list[Message],
    raw: Path,
    topic: str,
    rows_per_file: int = 250_000,
    file_per_partition: bool = False,
    spread: bool = False,
) -> dict[str, int]:
    """Render and write the hour; returns counts (changes, messages, bytes). The files hold
    every partition, interleaved as produced (Spark's Kafka source), or with
    `file_per_partition` a partition each (Kafka Connect's S3 sink), each in offset order;
    `spread`: the changes spread over the files at random, each file's records out of
    Kafka's order (dumps written by several consumers, or copied and merged)."""
    folder = raw / topic / f"dt={p.hour:%Y-%m-%d}" / f"hour={p.hour:%H}"
    folder.mkdir(parents=True, exist_ok=True)
    per = messages_per_change(kinds, p.op)
    rank = _rank_in_partition(p.partition, per)
    n_msgs, n_bytes, file_no = 0, 0, 0
    order = np.random.default_rng(p.n).permutation(p.n) if spread else np.arange(p.n)
    for lo in range(0, p.n, rows_per_file):
        idx = np.sort(order[lo : lo + rows_per_file])
        table = _render(p, kinds, idx, rank, topic)
        if spread:
            table = table.take(np.random.default_rng(lo).permutation(table.num_rows))
        if file_per_partition:
            parts = table.column("partition").to_numpy()
            for part in np.unique(parts):
                mine = table.filter(pa.array(parts == part)).sort_by("offset")
                pq.write_table(mine, folder / f"part-{file_no:05d}-p{part:05d}.parquet")
        else:
            pq.write_table(table, folder / f"part-{file_no:05d}.parquet")
        file_no += 1
        n_msgs += table.num_rows
        n_bytes += table.column("value").nbytes
    (folder / "_SUCCESS").touch()
    return {"changes": p.n, "messages": n_msgs, "value_bytes": n_bytes}


def _rank_in_partition(partition: np.ndarray, per: np.ndarray) -> np.ndarray:
    """Offset of each change's first message in its partition."""
    rank = np.zeros(len(partition), np.int64)
    for part in np.unique(partition):
        sel = partition == part
        rank[sel] = np.cumsum(per[sel]) - per[sel]
    return rank


def _render(p: Plan, kinds: list[Message], idx: np.ndarray, rank: np.ndarray, topic: str) -> Any:
    pieces, order = [], []
    sub = np.zeros(len(idx), np.int64)  # the message's number within its change
    for kind in kinds:
        sel = idx[np.isin(p.op[idx], kind.ops)]
        if not len(sel):
            continue
        local = np.searchsorted(idx, sel)
        offset = rank[sel] + sub[local]
        sub[local] += 1
        if kind.template is None:
            value = pa.nulls(len(sel), pa.binary())
        else:
            value = to_binary(kind.template.fill(kind.values(p, sel, offset), len(sel)))
        key = to_binary(kind.key(p, sel)) if kind.key else pa.nulls(len(sel), pa.binary())
        pieces.append(
            pa.table(
                {
                    "key": key,
                    "value": value,
                    "topic": pa.array([topic] * len(sel), pa.string()),
                    "partition": pa.array(p.partition[sel], pa.int32()),
                    "offset": pa.array(offset, pa.int64()),
                    "timestamp": pa.array(p.ts_ms[sel], pa.timestamp("ms", tz="UTC")),
                    "timestampType": pa.array(np.zeros(len(sel), np.int32)),
                    "headers": pa.nulls(len(sel), KAFKA_PARQUET_SCHEMA.field("headers").type),
                },
                schema=KAFKA_PARQUET_SCHEMA,
            )
        )
        order.append(sel * 4 + (sub[local] - 1))
    table = pa.concat_tables(pieces)
    return table.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))


def image(p: Plan, sel: np.ndarray, which: str) -> dict[str, np.ndarray]:
    """The before or after image's columns of the changes `sel` (their indexes in the plan)."""
    src = sel if which == "after" else p.prev[sel]
    if (src < 0).any():
        raise ValueError("a before image of a change with no previous change")
    return {
        "id": p.key[src] + KEY0,
        "amount": p.amount[src],
        "status": STATUSES[p.status[src]],
        "note": p.note[src],
        "updated_ms": p.ts_ms[src] // 1000 * 1000,
    }


def iter_sizes(text: str) -> Iterator[int]:
    for part in text.split(","):
        part = part.strip().lower()
        mult = 1_000_000 if part.endswith("m") else 1_000 if part.endswith("k") else 1
        yield int(float(part.rstrip("mk")) * mult)


def hour_start(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H").replace(tzinfo=UTC)
