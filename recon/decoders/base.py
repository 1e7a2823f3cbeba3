"""The decoder interface: one stateful decoder per (topic, partition) stream, fed in offset order.

A decoder turns raw Kafka records into canonical `Event`s, quarantines what it cannot decode
(with the reason), counts what it drops on purpose (heartbeats, checkpoints, tombstones,
transaction markers), and at the end of the hour hands back the raw records that must be carried
to the next hour (an incomplete segmented envelope, an open transaction, an unpaired
UPDATE_BEFOR): those are never decoded half.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from recon.model import Event, RawRecord
from recon.sqlddl import TableDef


@dataclass
class DecodeContext:
    """What a decoder may know besides the records: config and state, read-only."""

    tables: dict[str, TableDef] = field(default_factory=dict)  # "db.table" -> definition
    primary_keys: dict[str, list[str]] = field(default_factory=dict)  # "db.table" -> pk (config)


@dataclass
class Sink:
    """Where decoders put their output; the stream driver turns it into Arrow batches."""

    events: list[Event] = field(default_factory=list)
    quarantine: list[tuple[RawRecord, str]] = field(default_factory=list)
    stats: Counter[tuple[str, int, str]] = field(default_factory=Counter)
    quarantined: set[tuple[str, int, int]] = field(default_factory=set)  # for the audit's check

    def count(self, rec: RawRecord, stat: str, n: int = 1) -> None:
        self.stats[(rec.topic, rec.partition, stat)] += n

    def bad(self, rec: RawRecord, reason: str) -> None:
        self.quarantine.append((rec, reason))
        self.quarantined.add((rec.topic, rec.partition, rec.offset))
        self.count(rec, "records_quarantined")
        self.count(rec, "quarantined:" + reason.split(":", 1)[0])


class StreamDecoder:
    """Base class; subclasses implement `feed` and, if they hold state, `finish`."""

    format_name = ""

    def __init__(self, ctx: DecodeContext, sink: Sink) -> None:
        self.ctx = ctx
        self.sink = sink

    def feed(self, rec: RawRecord) -> None:
        raise NotImplementedError

    def finish(self) -> list[RawRecord]:
        """End of the hour for this stream: the records to carry over (with `skip` set)."""
        return []


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
        self.pending: list[RawRecord] = []  # groups since BEGIN, flattened
        self._group: list[RawRecord] = []
        self._group_pending = False

    def start_group(self, records: list[RawRecord]) -> None:
        self._group = records
        self._group_pending = False
        if self.open:
            self._attach_group(0)

    def _attach_group(self, skip: int) -> None:
        if self._group_pending:
            return
        first = True
        for r in self._group:
            r.skip = skip if first else 0
            first = False
            self.pending.append(r)
        self._group_pending = True

    def begin(self, item_index: int, txn_id: str | None) -> None:
        if self.open:
            # BEGIN without COMMIT: the producer lost the commit; apply nothing of it, and
            # quarantine its records (those not shared with the group holding the new BEGIN).
            rec = self._group[0]
            self.sink.count(rec, "transactions_abandoned")
            self.sink.count(rec, "events_abandoned", len(self.events))
            in_group = {id(r) for r in self._group}
            began = self.pending[0].offset if self.pending else rec.offset
            for r in self.pending:
                if id(r) not in in_group:
                    self.sink.bad(
                        r,
                        f"abandoned transaction: the one begun at offset {began} "
                        f"has no COMMIT before the next BEGIN",
                    )
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
        else:
            self.sink.events.append(ev)

    def commit(self, txn_id: str | None = None) -> None:
        if not self.open:
            if self._group:
                self.sink.count(self._group[0], "commits_without_begin")
            return
        rec = self._group[0]
        for ev in self.events:
            if txn_id and not ev.txn_id:
                ev.txn_id = txn_id
        self.sink.events.extend(self.events)
        self.sink.count(rec, "transactions_committed")
        self.open = False
        self.txn_id = None
        self.events = []
        self.pending = []
        self._group_pending = False

    def finish(self) -> list[RawRecord]:
        if not self.open:
            return []
        if self.pending:
            self.sink.count(self.pending[0], "transactions_carried")
        return list(self.pending)
