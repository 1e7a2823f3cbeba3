"""A decoder's fast lane: the common records of a stream decoded straight into columns.

Most records of an hour are plain row changes that a decoder turns into an `Event` and the
stream driver then takes apart again, field by field, into the output's Arrow columns. A lane
writes such a record's fields into columns (`LaneRows`) directly: no `Event`, no dict per image.

A lane takes a record only when it knows the decoder would decode it to exactly that row, and
only while the decoder holds nothing (no record waits in it for a partner): then the decoder,
had it been fed the record, would have ended in the same state. Anything else (a control
record, damage, a record the decoder would count or pair) it refuses, changing nothing, and the
stream driver feeds the record to the decoder, after the one record the lane may hold for its
partner (`release`). So the hour's events, quarantine, carry and counters are the decoder's,
whichever records the lane took; only the order of the event rows differs.

A lane reads a record by its format's C module (`recon.decode.formats.native`): one fast read
per format, held to the decoder's answer by the differential tests; a lane has no read of its
own beside it (a record C leaves goes to the decoder).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from recon.core.model import Event, Op, RawRecord

if TYPE_CHECKING:
    from recon.decode.base import StreamDecoder


Image = tuple[tuple[str, ...], list[str | None]]
"""A row's image as a lane reads it: (its column names, their values as text)."""


class LaneImage:
    """One image column (`before` or `after`) of the lane's rows: the names tuple of each row
    that has an image (most rows of a table share their schema's one object, so the column's
    names are built once per distinct tuple: `recon.decode.stream._names_array`), every row's
    values flat, as UTF-8 (`data`) and each one's size in bytes (`sizes`: native int32s, -1 a
    NULL), the Arrow column's buffers but for the offsets (`stream._values_array`), and each
    row's count of values (-1: no image). The C record loops append to them as they are
    (`_lane_rows.h`); building the values as strs, and Arrow reading each str again, took
    ~55 ns a value of a Debezium hour."""

    def __init__(self) -> None:
        self.names: list[tuple[str, ...]] = []
        self.data = bytearray()
        self.sizes = bytearray()
        self.lengths: list[int] = []

    def add(self, image: Image | None) -> None:
        """A row's image: (its column names, their values), or None."""
        if image is None:
            self.lengths.append(-1)
            return
        self.names.append(image[0])
        sizes = []
        for v in image[1]:
            if v is None:
                sizes.append(-1)
                continue
            b = v.encode()
            self.data += b
            sizes.append(len(b))
        self.sizes += array("i", sizes).tobytes()
        self.lengths.append(len(image[1]))

    @property
    def values(self) -> list[str | None]:
        """The values as strs (for a reader of a few: the tests)."""
        out: list[str | None] = []
        at = 0
        for size in array("i", bytes(self.sizes)):
            out.append(None if size < 0 else self.data[at : at + size].decode())
            at += max(size, 0)
        return out

    def clear(self) -> None:
        self.names.clear()
        del self.data[:]
        del self.sizes[:]
        self.lengths.clear()


LANE_COLUMNS = (
    "db", "tbl", "pk", "types", "order_key", "gtid", "binlog_file", "binlog_pos", "seq",
    "event_index", "txn_id", "event_time_ms", "defaults", "topic", "partition", "offset",
)  # fmt: skip
"""The event columns of a lane's row, in its tuple's order: an `Event`'s fields but `op`,
`before` and `after` (a lane fills those besides) and `ddl` (a lane takes no DDL)."""


class LaneRows:
    """The events the lanes of one decode task decoded, as a row tuple each (`LANE_COLUMNS`),
    their ops and images, until the stream driver writes them out; and their shapes, counted as
    the driver counts its events' (`recon.decode.stream._shape_batch`: the same keys)."""

    def __init__(self) -> None:
        self.ops: list[str] = []
        self.rows: list[tuple[Any, ...]] = []
        self.before = LaneImage()
        self.after = LaneImage()
        self.shapes: dict[tuple[Any, ...], list[Any]] = {}
        """Shape key -> [an `Event` of that shape, how many]."""
        self.repeated: dict[str, Any] = {}
        """Per nested column, the last batch's column whose rows all held one value, and that
        value (`recon.decode.stream._nested_array`): kept from batch to batch (not cleared)."""

    def __len__(self) -> int:
        return len(self.ops)

    def sink(self) -> tuple[Any, ...]:
        """The lists, bytearrays and dict the rows are kept in, for the lanes' record loops in C
        (`_lane_rows.h`): ops, rows, before's names, values, sizes and lengths, after's,
        shapes."""
        b, a = self.before, self.after
        return (self.ops, self.rows, b.names, b.data, b.sizes, b.lengths, a.names, a.data,
                a.sizes, a.lengths, self.shapes)  # fmt: skip

    def columns(self) -> dict[str, Any]:
        """The rows as columns: `LANE_COLUMNS` and `op`, each a sequence."""
        columns = zip(*self.rows, strict=True) if self.rows else [()] * len(LANE_COLUMNS)
        return {"op": self.ops, **dict(zip(LANE_COLUMNS, columns, strict=True))}

    def clear(self) -> None:
        self.ops.clear()
        self.rows.clear()
        self.before.clear()
        self.after.clear()
        self.shapes.clear()


class Lane:
    """The fast lane of one decoder (one stream): subclasses implement `take` (with `attempt`
    and their `read`) and, when their decoder holds records, `idle`."""

    def __init__(self, dec: StreamDecoder, rows: LaneRows) -> None:
        self.dec = dec
        self.rows = rows
        self.counts: Counter[str] = Counter()
        """What the lane counted of the stream (`count`), added to the sink's at its end."""
        self.stream: tuple[str, int] | None = None

    def take(self, rec: RawRecord) -> int | None:
        """Decode `rec` into the rows when the decoder would decode it to the same rows and
        state: how many records that used up (0: the lane holds `rec` for its partner; 2: `rec`
        and the one it held). None, changing nothing, when the decoder must take `rec` (after
        the record `release` gives back)."""
        raise NotImplementedError

    def idle(self) -> bool:
        """Whether the decoder holds nothing a record could meet (the lane takes none else)."""
        return True

    def run(
        self, cols: Sequence[Sequence[Any]], start: int, end: int, budget: int
    ) -> tuple[int, int]:
        """Take records `start` to `end` of a run of one partition's records (`cols`: its
        columns, `recon.decode.stream.RawRun`; none carried) in turn, as `take` would,
        emitting at most `budget` rows: (where it stopped, how many records that used up). It
        stops at the first record it leaves to `take` (or to the decoder), and before any while
        the lane holds a record or the decoder is not idle. Lanes without a record loop take
        none."""
        return start, 0

    def read(self, rec: RawRecord) -> Any:
        """What the lane takes of `rec`: None (or an error) when it takes nothing."""
        raise NotImplementedError

    def attempt(self, rec: RawRecord) -> Any:
        """`read` of a record the lane may take (not carried, the decoder idle); None when it
        may not, or `read` finds nothing or fails (the decoder then says what is wrong)."""
        if rec.carried or not self.idle():
            return None
        try:
            return self.read(rec)
        except Exception:  # noqa: BLE001 - refused: the decoder says what is wrong with it
            return None

    def count(self, rec: RawRecord, stat: str) -> None:
        """One more of `stat` (a `recon.decode.stats.Stat`) in `rec`'s stream."""
        self.count_in((rec.topic, rec.partition), stat)

    def count_in(self, stream: tuple[str, int], stat: str, n: int = 1) -> None:
        """`n` more of `stat` in the stream (topic, partition): a record loop's counts."""
        self.counts[stat] += n
        self.stream = stream

    def emit(self, op: Op, row: tuple[Any, ...], before: Image | None, after: Image | None) -> None:
        """A row change: its op, its row (`LANE_COLUMNS`), its images; counted by its shape
        (`recon.decode.stream._shape_batch`'s first key)."""
        rows = self.rows
        rows.ops.append(op)
        rows.rows.append(row)
        rows.before.add(before)
        rows.after.add(after)
        shown = after if after is not None else before
        assert shown is not None
        key = (row[0], row[1], op, None, None, shown[0], id(row[3]), id(row[2]), id(row[12]))
        counted = rows.shapes.get(key)
        if counted is None:
            rows.shapes[key] = [event_of(op, row, _image_dict(before), _image_dict(after)), 1]
        else:
            counted[1] += 1

    def release(self) -> RawRecord | None:
        """The record the lane holds, if any, given back to be fed to the decoder before any
        other (the decoder takes over from there)."""
        return None

    def close(self) -> None:
        """The stream ends: what the lane counted goes to the decoder's sink."""
        if self.stream is not None:
            topic, partition = self.stream
            for stat, n in self.counts.items():
                self.dec.sink.stats[(topic, partition, str(stat))] += n
        self.counts.clear()


def opening_specs(recent: list[tuple[bytes, Any]], spec_of: Any) -> list[tuple[bytes, Any]]:
    """(opening, spec or None) of each schema opening a lane's parse knows (`recent`: (opening,
    the schema's object), `recon.decode.base.SharedMemberJson.recent`), for the JSON lanes'
    record loops. A schema the lane cannot read (`spec_of` raises: a producer's schema of
    another form) has None: its messages go to `take`, whose `attempt` meets the error again
    and leaves them to the decoder, as record by record."""
    out = []
    for opening, obj in recent:
        try:
            spec = spec_of(obj)
        except Exception:  # noqa: BLE001 - refused: the decoder says what is wrong with it
            spec = None
        out.append((opening, spec))
    return out


def event_of(op: Op, row: tuple[Any, ...], before: Any, after: Any) -> Event:
    """The `Event` of a lane's row (e.g. to show its shape)."""
    return Event(op=op, before=before, after=after, **dict(zip(LANE_COLUMNS, row, strict=True)))


def _image_dict(image: Image | None) -> dict[str, str | None] | None:
    return None if image is None else dict(zip(image[0], image[1], strict=True))
