"""The decoder interface: one stateful decoder per (topic, partition) stream, fed in offset order.

A decoder turns raw Kafka records into canonical `Event`s, quarantines what it cannot decode
(with the reason), counts what it drops on purpose (heartbeats, checkpoints, tombstones,
transaction markers), and at the end of the hour hands back the raw records that must be carried
to the next hour (an incomplete segmented envelope, an open transaction, an unpaired
UPDATE_BEFOR): those are never decoded half.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec
import orjson

from recon.core.limits import MAX_RECORD_BYTES
from recon.core.model import Event, RawRecord
from recon.core.sqlddl import TableDef
from recon.decode.stats import Stat, quarantined_because
from recon.errors import DecodeError, shortened

if TYPE_CHECKING:
    from recon.decode.lane import Lane

# what a decoder's message handler may raise on a malformed message: the record is quarantined
# with the format's label and the error (one list for every format, so the same damage gets the
# same reason everywhere)
MESSAGE_ERRORS: tuple[type[Exception], ...] = (
    DecodeError,
    TypeError,
    ValueError,
    KeyError,
    AttributeError,
)


@dataclass
class DecodeContext:
    """What a decoder may know besides the records: config and state, read-only."""

    tables: dict[str, TableDef] = field(default_factory=dict)  # "db.table" -> definition
    primary_keys: dict[str, list[str]] = field(default_factory=dict)  # "db.table" -> pk (config)
    max_record_bytes: int = MAX_RECORD_BYTES
    """A record whose value is larger is quarantined unread (`max_record_bytes` in the config)."""


@dataclass
class Sink:
    """Where decoders put their output; the stream driver turns it into Arrow batches."""

    events: list[Event] = field(default_factory=list)
    quarantine: list[tuple[RawRecord, str, Event | None]] = field(default_factory=list)
    stats: Counter[tuple[str, int, str]] = field(default_factory=Counter)
    quarantined: set[tuple[str, int, int]] = field(default_factory=set)  # for the audit's check
    held: dict[tuple[str, int, int], RawRecord] = field(default_factory=dict)
    """Records a decoder keeps past the record it was fed (segments, an open transaction, an
    UPDATE_BEFOR): each must leave by `consume`, `bad` or the carry `finish` returns."""
    released: dict[tuple[str, int, int], RawRecord] = field(default_factory=dict)
    """Records consumed during the current feed (counted by the stream driver after it)."""
    spilled: list[tuple[EventSpill, str | None]] = field(default_factory=list)
    """Committed transactions' events on disk, with their transaction id (`TxnAssembler`):
    the stream driver's next drain writes them out, chunk by chunk."""
    value_spills: list[ValueSpill] = field(default_factory=list)
    """The values of records open transactions hold (`TxnAssembler`), deleted once closed."""
    open_spills: list[EventSpill] = field(default_factory=list)
    """Spills of transactions not committed yet: dropped with them, or at the stream's end."""
    shadows: list[Event] = field(default_factory=list)
    """Events of records carried to the next hour that take effect in this hour only if the
    decode stage finds their partner in another partition (kind `pairable`; a DataWorks
    UPDATE_BEFOR whose UPDATE_AFTER went to another partition)."""

    def hold(self, rec: RawRecord) -> None:
        """The decoder keeps `rec` for later (it is not consumed by this feed)."""
        k = _rid(rec)
        self.released.pop(k, None)
        self.held[k] = rec

    def consume(self, rec: RawRecord) -> None:
        """The decoder is done with a record it held: its events were emitted (or it was a
        control record). The record being fed is consumed unless held or quarantined."""
        k = _rid(rec)
        self.held.pop(k, None)
        self.released[k] = rec

    def count(self, rec: RawRecord, stat: Stat | str, n: int = 1) -> None:
        """Count `n` of `stat` (a `Stat`, or a detail name from `recon.decode.stats`)."""
        self.stats[(rec.topic, rec.partition, str(stat))] += n

    def bad(self, rec: RawRecord, reason: str, ddl: Event | None = None) -> None:
        """Quarantine `rec` with the reason; `ddl`: the DDL it held that could not be read (the
        decode stage folds it into the table definitions: its table becomes unreadable)."""
        self._keep(rec, reason, ddl)
        self.count(rec, Stat.RECORDS_QUARANTINED)

    def lost(self, rec: RawRecord, reason: str) -> None:
        """A record the decoder dropped without a disposition (a bug): its bytes are kept in
        quarantine, but it is counted apart, so the conservation identity does not balance."""
        self._keep(rec, reason, None)
        self.count(rec, Stat.RECORDS_LOST)

    def _keep(self, rec: RawRecord, reason: str, ddl: Event | None) -> None:
        k = _rid(rec)
        self.held.pop(k, None)
        self.released.pop(k, None)
        self.quarantine.append((rec, reason, ddl))
        self.quarantined.add(k)
        self.count(rec, quarantined_because(reason))


def text_or_none(value: Any, what: str) -> str | None:
    """A message's field for a string column of the events: a string or None as it is;
    DecodeError for any other value (it would fail the decode task's whole batch when the
    column is built, not just its record)."""
    if value is None or type(value) is str:
        return value
    raise DecodeError(f"{what} {shortened(repr(value), 60)} is not a string")


def text_list(values: Any, what: str) -> list[str]:
    """A message's list of names (a primary key's columns): strings, or DecodeError (as
    `text_or_none`); an absent or empty one is empty."""
    names = list(values or [])
    for name in names:
        if type(name) is not str:
            raise DecodeError(f"{what} holds {shortened(repr(name), 60)}, not a column name")
    return names


def _rid(rec: RawRecord) -> tuple[str, int, int]:
    return (rec.topic, rec.partition, rec.offset)


class StreamDecoder:
    """Base class; subclasses implement `feed` and, if they hold state, `finish`."""

    format_name = ""
    lane: type[Lane] | None = None
    """Its fast lane (`recon.decode.lane`), if it has one."""

    def __init__(self, ctx: DecodeContext, sink: Sink) -> None:
        self.ctx = ctx
        self.sink = sink

    def feed(self, rec: RawRecord) -> None:
        raise NotImplementedError

    def finish(self) -> list[RawRecord]:
        """End of the hour for this stream: the records to carry over (with `skip` set)."""
        return []


class JsonStreamDecoder(StreamDecoder):
    """The shared prelude of the JSON formats: empty value, not JSON, not this format's
    message, and a malformed message each get one reason, worded the same in every format.

    Subclasses set `label` ("Canal flat message") and implement `accepts` and `handle`.
    """

    label = "message"

    def empty_value(self, rec: RawRecord) -> bool:
        """A record with no value: quarantined unless the format gives it a meaning (return
        True when handled, e.g. a Debezium tombstone)."""
        return False

    def accepts(self, msg: Any) -> str | None:
        """None when `msg` (parsed JSON) is this format's message, else why it is not."""
        raise NotImplementedError

    def handle(self, rec: RawRecord, msg: dict[str, Any]) -> None:
        raise NotImplementedError

    def parse(self, value: bytes) -> Any:
        """A record's value as parsed JSON (`orjson.JSONDecodeError` when it is not JSON). A
        format that knows its message's shape may read it faster, to the same objects."""
        return orjson.loads(value)

    def feed(self, rec: RawRecord) -> None:
        value = rec.value
        # `not value.strip()`, without copying the value (the same ASCII whitespace)
        if not value or value.isspace():
            if not self.empty_value(rec):
                self.sink.bad(rec, f"empty value: a {self.label} needs a JSON object")
            return
        try:
            msg = self.parse(value)
        except orjson.JSONDecodeError as err:
            self.sink.bad(rec, f"not JSON: {err}")
            return
        refused = self.accepts(msg)
        if refused is not None:
            self.sink.bad(rec, f"not a {self.label}: {refused}")
            return
        try:
            self.handle(rec, msg)
        except MESSAGE_ERRORS as err:
            self.sink.bad(rec, f"bad {self.label}: {err}")


_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ANY = msgspec.json.Decoder()


class SharedMemberJson:
    """Reads a JSON object as `orjson.loads` does, faster where every message repeats one
    top-level member (a Debezium envelope's `schema`, most of its bytes; a DataWorks
    message's `schema`): that member is parsed once per distinct text, and the messages that
    repeat it share one object (read-only). The rest is parsed by msgspec, which keeps an
    integer beyond 64 bits exact (orjson made it a float). A value msgspec refuses, or that is
    not an object, is read by orjson, so that its error (or value) is orjson's, as before.

    A message that opens with the member, as text seen before (`recent`: `{"schema":`, its
    text and a comma), is not scanned again: only what follows is parsed, as an object of the
    other members. Reading the whole envelope to find the member, and copying and hashing its
    text to look it up, was ~4 of the ~38 us a Debezium message cost."""

    def __init__(self, member: str, limit: int = 1024, recent: int = 8) -> None:
        self.member = member
        self.limit = limit
        self.shared: dict[bytes, Any] = {}
        self.opening = b'{"' + member.encode() + b'":'
        self.recent: list[tuple[bytes, Any]] = []
        """(the opening of a message up to the member's text and a comma, the member's
        object), the latest learnt first; at most `recent_max`."""
        self.recent_max = recent

    def __call__(self, value: bytes) -> Any:
        for prefix, obj in self.recent:
            if value.startswith(prefix):
                got = self._after(value, len(prefix), obj)
                if got is not None:
                    return got
                break
        try:
            top = _TOP.decode(value)
            return {
                k: self._member(v, value) if k == self.member else _ANY.decode(v)
                for k, v in top.items()
            }
        except Exception:  # noqa: BLE001 - msgspec refused it: orjson says why, as before
            return orjson.loads(value)

    def known_opening(self, value: bytes) -> tuple[Any, int] | None:
        """(the member's object, where the members after it begin) of a message that opens
        with the member as a text seen before (`recent`, the prefix `__call__` reads first);
        None for any other."""
        for prefix, obj in self.recent:
            if value.startswith(prefix):
                return obj, len(prefix)
        return None

    def _after(self, value: bytes, start: int, obj: Any) -> dict[str, Any] | None:
        """The message whose shared member (`obj`) is followed by a comma at `start - 1`: the
        other members, read as an object of their own (one of them the shared member again:
        its value wins, as in orjson); None unless they are one or more members (the whole
        message is read then, as any other)."""
        try:
            rest = _ANY.decode(b"{" + value[start:])
        except (msgspec.DecodeError, ValueError):  # bytes that are not UTF-8 too: the whole
            return None  # message is read then, and its error is orjson's whatever is cached
        if not rest:
            return None
        return {self.member: obj, **rest}

    def _member(self, raw: msgspec.Raw, value: bytes) -> Any:
        text = bytes(raw)
        obj = self.shared.get(text)
        if obj is None:
            if len(self.shared) >= self.limit:
                self.shared.clear()
            obj = self.shared[text] = _ANY.decode(text)
        start = len(self.opening)
        end = start + len(text)  # the member first, written without spaces around it
        if (
            value.startswith(self.opening)
            and value.startswith(text, start)
            and value[end : end + 1] == b","
        ):  # checked in place: a message that opens otherwise copies nothing
            prefix = value[: end + 1]
            self.recent = [(prefix, obj), *(r for r in self.recent if r[0] != prefix)]
            del self.recent[self.recent_max :]
        return obj


T = TypeVar("T")


class PerObject(Generic[T]):
    """A value derived once per object (by identity: the shared members `SharedMemberJson`
    gives), computed by `derive` the first time; the object is held, so its id stays its own.
    Bounded: cleared when `limit` objects are held."""

    def __init__(self, derive: Callable[[Any], T], limit: int = 1024) -> None:
        self.derive = derive
        self.limit = limit
        self.known: dict[int, tuple[Any, T]] = {}

    def __call__(self, obj: Any) -> T:
        hit = self.known.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = self.derive(obj)
        if len(self.known) >= self.limit:
            self.known.clear()
        self.known[id(obj)] = (obj, value)
        return value


TXN_SPILL_EVENTS = 50_000
"""An open transaction's events go to a file of their own every this many: a transaction of
millions of changes is not held in memory until its COMMIT (`EventSpill`)."""


def spill_dir() -> str | None:
    """Spark's local folder for a task's scratch files when the worker has one, else the
    system's temporary folder."""
    return os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0] or None


class _ScratchFile:
    """A file of this process's own (mode 0600) in `spill_dir`, deleted by `drop`."""

    def __init__(self, suffix: str, mode: str) -> None:
        fd, self.path = tempfile.mkstemp(prefix="recon-txn-", suffix=suffix, dir=spill_dir())
        self.file = os.fdopen(fd, mode)

    def drop(self) -> None:
        self.file.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class EventSpill(_ScratchFile):
    """An open transaction's events on disk: chunks of `Event`s, pickled (this process wrote
    the file, mode 0600, and reads it back; it is deleted when read or dropped)."""

    def __init__(self) -> None:
        super().__init__(".pickle", "wb")
        self.count = 0

    def write(self, events: list[Event]) -> None:
        pickle.dump(events, self.file, protocol=pickle.HIGHEST_PROTOCOL)
        self.count += len(events)

    def chunks(self) -> Iterator[list[Event]]:
        self.file.close()
        with open(self.path, "rb") as f:
            while True:
                try:
                    yield pickle.load(f)  # noqa: S301 - written by this process, above
                except EOFError:
                    return


TXN_SPILL_BYTES = 64 << 20
"""An open transaction's records' values go to a file of their own once they hold this many
bytes in memory (`ValueSpill`): needed again only if the transaction is carried to the next
hour or abandoned (quarantined)."""


class ValueSpill(_ScratchFile):
    """The values of records an open transaction holds, on disk (mode 0600). Closed when the
    transaction is done (committed, abandoned, carried): the stream driver deletes it at its
    next drain, after it read the values it still writes out (`value_bytes`)."""

    def __init__(self) -> None:
        super().__init__(".values", "w+b")
        self.closed = False

    def put(self, value: bytes) -> SpilledValue:
        at = self.file.seek(0, os.SEEK_END)
        self.file.write(value)
        return SpilledValue(self, at, len(value))

    def read(self, at: int, n: int) -> bytes:
        self.file.flush()
        self.file.seek(at)
        return self.file.read(n)


@dataclass(frozen=True, slots=True)
class SpilledValue:
    """A record's value in a `ValueSpill` (what `RawRecord.value` holds once spilled)."""

    spill: ValueSpill
    at: int
    length: int


def value_bytes(value: bytes | SpilledValue | None) -> bytes | None:
    """A record's value, read back from its spill when it was spilled."""
    if isinstance(value, SpilledValue):
        return value.spill.read(value.at, value.length)
    return value


class TxnAssembler:
    """Holds the events of an open transaction until its commit (Tencent, TDSQL, Canal pb).

    A "group" is the raw records decoded together (a reassembled envelope, or one record); its
    "items" are the entries inside. When the hour ends inside a transaction, every group from the
    one holding BEGIN onwards is carried, the first with `skip` = the items before BEGIN, which
    were already emitted.
    """

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.open = False
        self.txn_id: str | None = None
        self.events: list[Event] = []
        self.spill: EventSpill | None = None  # the events before `events`, when there are many
        self.pending: list[RawRecord] = []  # groups since BEGIN, flattened
        self.values: ValueSpill | None = None  # the values of `pending[:spilled]`, when large
        self.spilled = 0
        self.unspilled_bytes = 0
        self._group: list[RawRecord] = []
        self._group_pending = False

    def start_group(self, records: list[RawRecord]) -> None:
        for r in records:  # decoded now: used up, unless an open transaction holds them again
            self.sink.consume(r)
        self._group = records
        self._group_pending = False
        if self.open:
            self._attach_group(0)

    def _attach_group(self, skip: int) -> None:
        if self._group_pending:
            return
        if self.unspilled_bytes >= TXN_SPILL_BYTES:
            self._spill_values()
        first = True
        for r in self._group:
            r.skip = skip if first else 0
            first = False
            self.pending.append(r)
            self.unspilled_bytes += len(r.value) if isinstance(r.value, bytes) else 0
            self.sink.hold(r)
        self._group_pending = True

    def begin(self, item_index: int, txn_id: str | None) -> None:
        if self.open:
            # BEGIN without COMMIT: the producer lost the commit; apply nothing of it, and
            # quarantine its records (those not shared with the group holding the new BEGIN).
            rec = self._group[0]
            self.sink.count(rec, Stat.TRANSACTIONS_ABANDONED)
            spilled = self.spill.count if self.spill is not None else 0
            self.sink.count(rec, Stat.EVENTS_ABANDONED, len(self.events) + spilled)
            self._drop_spill()
            in_group = {id(r) for r in self._group}
            began = self.pending[0].offset if self.pending else rec.offset
            for r in self.pending:
                if id(r) not in in_group:
                    self.sink.bad(
                        r,
                        f"abandoned transaction: the one begun at offset {began} "
                        f"has no COMMIT before the next BEGIN",
                    )
        self._done_with_values()  # (an abandoned one's records are quarantined with theirs)
        self.open = True
        self.txn_id = txn_id
        self.events = []
        self.pending = []
        self._group_pending = False
        self._attach_group(item_index)

    def event(self, ev: Event) -> None:
        if self.open:
            ev.txn_id = ev.txn_id or self.txn_id
            self.events.append(ev)
            if len(self.events) >= TXN_SPILL_EVENTS:
                if self.spill is None:
                    self.spill = EventSpill()
                    self.sink.open_spills.append(self.spill)
                self.spill.write(self.events)
                self.events = []
        else:
            self.sink.events.append(ev)

    def _spill_values(self) -> None:
        """The values of the records held so far (earlier groups', all decoded) to disk."""
        if self.values is None:
            self.values = ValueSpill()
            self.sink.value_spills.append(self.values)
        for r in self.pending[self.spilled :]:
            if isinstance(r.value, bytes):
                r.value = self.values.put(r.value)  # type: ignore[assignment]
        self.spilled = len(self.pending)
        self.unspilled_bytes = 0

    def _done_with_values(self) -> None:
        if self.values is not None:
            self.values.closed = True
        self.values, self.spilled, self.unspilled_bytes = None, 0, 0

    def _drop_spill(self) -> None:
        if self.spill is not None:
            self.sink.open_spills.remove(self.spill)
            self.spill.drop()
            self.spill = None

    def commit(self, txn_id: str | None = None) -> None:
        if not self.open:
            if self._group:
                self.sink.count(self._group[0], Stat.COMMITS_WITHOUT_BEGIN)
            return
        rec = self._group[0]
        for ev in self.events:
            if txn_id and not ev.txn_id:
                ev.txn_id = txn_id
        self.sink.events.extend(self.events)
        if self.spill is not None:  # written out before the events above (`Sink.spilled`)
            self.sink.open_spills.remove(self.spill)
            self.sink.spilled.append((self.spill, txn_id))
            self.spill = None
        for r in self.pending:
            self.sink.consume(r)
        self.sink.count(rec, Stat.TRANSACTIONS_COMMITTED)
        self._done_with_values()
        self.open = False
        self.txn_id = None
        self.events = []
        self.pending = []
        self._group_pending = False

    def run_items(self, group: list[RawRecord], items: list[tuple[str, Any]]) -> None:
        """Feed one decoded group's items in order: ("begin", txn id), ("commit", txn id),
        ("event", Event) or ("control", Stat). A carried group skips the items already
        emitted in the hour before (`skip` of its first record)."""
        skip = group[0].skip if group[0].carried else 0
        if not (self.open or skip) and self._whole_transaction(group, items):
            return
        self.start_group(group)
        for i, (kind, payload) in enumerate(items):
            if i < skip:
                continue
            if kind == "begin":
                self.begin(i, payload)
            elif kind == "commit":
                self.commit(payload)
            elif kind == "event":
                self.event(payload)
            else:
                self.sink.count(group[0], payload)

    def _whole_transaction(self, group: list[RawRecord], items: list[tuple[str, Any]]) -> bool:
        """With no transaction open: a group that holds one whole transaction (BEGIN, events,
        COMMIT: most messages of a transactional producer) is applied at once, as `begin`,
        `event` and `commit` in turn would leave it. Returns False, changing nothing, for
        any other group."""
        if len(items) < 2 or items[0][0] != "begin" or items[-1][0] != "commit":
            return False
        events = [payload for kind, payload in items[1:-1] if kind == "event"]
        if len(events) != len(items) - 2:
            return False
        sink = self.sink
        for r in group:
            r.skip = 0
            if _rid(r) in sink.held:  # an earlier segment; the record being fed is used up
                sink.consume(r)  # unless it is held or quarantined (the stream driver)
        begun, committed = items[0][1], items[-1][1]
        for ev in events:
            txn_id = ev.txn_id or begun
            ev.txn_id = committed if committed and not txn_id else txn_id
        sink.events.extend(events)
        sink.count(group[0], Stat.TRANSACTIONS_COMMITTED)
        self.applied_whole(group)
        return True

    def applied_whole(self, group: list[RawRecord]) -> None:
        """`group` held one whole transaction, applied at once (its events emitted and its
        commit counted by the caller): the state `begin`, `event` and `commit` would leave."""
        self._group = group
        self._group_pending = False

    def finish(self) -> list[RawRecord]:
        if not self.open:
            return []
        if self.pending:
            self.sink.count(self.pending[0], Stat.TRANSACTIONS_CARRIED)
        return list(self.pending)
