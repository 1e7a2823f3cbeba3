"""A decode task's per-key pre-fold: which of its events a later event of the same key beats.

The merge keeps, per key of a keyed table, the contribution with the highest (order key, sign)
(`recon.merge.state.fold`). An event whose only contribution has a lower order key than another
contribution to the same key, in the same decode task, can never win: its key's winner is
elsewhere in the hour. The task finds those events (`superseded`) from what it decoded, and
writes its events again without them (`kind=winner`, beside `kind=event`, which keeps every
event for every other reader), each winning contribution with the order keys of the events it
superseded (`sup_img` for the image a key's row gets, `sup_tomb` for a tombstone): what the
merge needs of them to count changes that are stale or already applied
(`recon.merge.state.skip_counts`). The merge folds the winners instead of every event when that
gives the same state (`recon.merge.winners`): an hour of a million changes to a hundred
thousand keys then costs the JVM's heavy steps (the contributions kept on disk, the shuffle and
sort of their images) a hundred thousand rows, not a million.

A key here is finer than the merge's, never coarser: the source `db` and `tbl` (the merge's
table may gather several), the key columns the event states (`pk`) and their values, so two
events of one key here are of one key there whenever the merge's key columns are those the
events state (the merge checks that from the hour's shapes). The contributions follow
`recon.merge.contributions.contributions`: an event with an after image makes its key's image;
an update or delete whose before image holds every key column makes a tombstone of that key
when it is a delete, has no after image, or moves the key. Only an event with one contribution,
and that one counted as its change (an image, or a delete's tombstone), is ever superseded; any
contribution can supersede.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SUP_TYPE = pa.list_(pa.binary())
SUP_FIELDS = (pa.field("sup_img", SUP_TYPE), pa.field("sup_tomb", SUP_TYPE))
"""The winners' added columns: the order keys of the events each winning image (`sup_img`) or
tombstone (`sup_tomb`) superseded."""

WINNER_COLUMNS = (
    "db", "tbl", "op", "before", "after", "order_key", "event_time_ms", "topic", "partition",
    "offset",
)  # fmt: skip
"""What a winners file keeps of its events (with `SUP_FIELDS`): what the merge reads of them
to make their contributions (`recon.merge.contributions.contributions`)."""

HOLD_BYTES = 256 * 1024 * 1024
"""A task's event batches kept to write its winners from, up to this many bytes of them; a task
with more reads its winners back from its event file."""

WORTH = 0.1
"""The share of a task's events that must be superseded for it to write its winners: below, the
merge reads its events as they are (a second copy of nearly all of them would cost the decode
more than the merge saves)."""

_SEP = "\x00"  # between the key column names of an event (each escaped: `_escaped`)


def _escaped(v: pa.Array) -> pa.Array:
    """Text with no NUL left: backslashes doubled, NULs as `\\0`."""
    return pc.replace_substring(pc.replace_substring(v, "\\", "\\\\"), _SEP, "\\0")


def _unescaped(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _SEP if m.group(1) == "0" else m.group(1), text)


def _pk_texts(pk: pa.Array) -> pa.Array:
    """Each event's key column names as one text (`_escaped`, joined by NUL): NULL where the
    event states no key."""
    lengths = pc.fill_null(pc.list_value_length(pk), 0).to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(pk) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    names = pa.ListArray.from_arrays(pa.array(offsets), _escaped(pc.list_flatten(pk)))
    stated = pc.greater(pa.array(lengths), 0)
    return pc.if_else(stated, pc.binary_join(names, _SEP), pa.scalar(None, pa.string()))


def _lookup(img: pa.MapArray, name: str) -> tuple[pa.Array, pa.Array]:
    """(the value of `name` in each image, or NULL; whether the image holds `name` at all).
    An hour's images mostly hold their columns in one order: the entry at the place `name`
    has in the first image that holds it is read for every image first (a take, where
    `map_lookup` scans each image's names), and only the others are looked up."""
    n = len(img)
    offs = img.offsets.to_numpy(zero_copy_only=False)
    lengths = offs[1:] - offs[:-1]
    keys = img.keys
    guess = 0
    first = np.flatnonzero(lengths > 0)
    if len(first):
        row = keys.slice(offs[first[0]], lengths[first[0]]).to_pylist()
        guess = row.index(name) if name in row else 0
    at = np.where(lengths > guess, offs[:-1] + guess, 0)
    if len(keys) == 0:
        return pa.nulls(n, pa.string()), pa.array(np.zeros(n, dtype=bool))
    hit = pc.and_(pa.array(lengths > guess), pc.equal(keys.take(pa.array(at)), name))
    for earlier in range(guess):  # the name's first entry, as `map_lookup` and Spark read it
        at_e = np.where(lengths > guess, offs[:-1] + earlier, 0)
        hit = pc.and_(hit, pc.not_equal(keys.take(pa.array(at_e)), name))
    hit = pc.and_(pc.fill_null(hit, False), pc.is_valid(img))
    values = pc.if_else(hit, img.items.take(pa.array(at)), pa.scalar(None, pa.string()))
    held = hit
    rest = pc.and_(pc.invert(hit), pc.is_valid(img))
    if pc.any(rest).as_py():
        where = np.flatnonzero(rest.to_numpy(zero_copy_only=False))
        sub = img.take(pa.array(where))
        found = pc.map_lookup(sub, pa.scalar(name), "all")
        held_np = hit.to_numpy(zero_copy_only=False).copy()
        held_np[where] = pc.fill_null(pc.greater(pc.list_value_length(found), 0), False).to_numpy(
            zero_copy_only=False
        )
        vals = values.to_pylist()  # rare: images of another column order
        for i, v in zip(
            where, pc.map_lookup(sub, pa.scalar(name), "first").to_pylist(), strict=True
        ):
            vals[i] = v
        values, held = pa.array(vals, pa.string()), pa.array(held_np)
    return values, held


def _null_safe_differ(a: pa.Array, b: pa.Array) -> pa.Array:
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    return pc.invert(pc.or_(both_null, pc.fill_null(pc.equal(a, b), False)))


class _Ids:
    """Small integers for the texts a task's events repeat (source tables, ops)."""

    def __init__(self) -> None:
        self.of: dict[tuple[str | None, ...], int] = {}
        self.names: list[tuple[str | None, ...]] = []

    def encode(self, *cols: pa.Array) -> np.ndarray:
        """Per row, the id of its values in `cols` (NULL is a value)."""
        code = np.zeros(len(cols[0]), dtype=np.int64)
        dicts = []
        for c in cols:
            enc = pc.dictionary_encode(c)
            dicts.append(enc.dictionary.to_pylist())
            code = code * (len(dicts[-1]) + 1) + _indices(enc) + 1
        seen = np.flatnonzero(np.bincount(code))
        ids = np.zeros(int(seen[-1]) + 1 if len(seen) else 1, dtype=np.int32)
        for u in seen.tolist():
            key = self._key(u, dicts)
            if key not in self.of:
                self.of[key] = len(self.names)
                self.names.append(key)
            ids[u] = self.of[key]
        return ids[code]

    @staticmethod
    def _key(u: int, dicts: list[list[Any]]) -> tuple[Any, ...]:
        parts = []
        for d in reversed(dicts):
            u, j = divmod(u, len(d) + 1)
            parts.append(None if j == 0 else d[j - 1])
        return tuple(reversed(parts))


def _indices(enc: pa.DictionaryArray) -> np.ndarray:
    """A dictionary array's indices as int64, -1 for NULL."""
    idx = enc.indices
    if idx.null_count == 0:
        return idx.to_numpy().astype(np.int64)
    return pc.fill_null(idx, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def _narrow(
    batch: pa.RecordBatch, base: int, src: np.ndarray, ops: np.ndarray
) -> list[tuple[tuple[str, ...], pa.Table]]:
    """The contributions of a batch of events, per the key columns their events state: each
    with its event's row in the task's event file (`base` + its place in the batch), its kind
    (`slot`: 0 an image, 1 a tombstone), its event's source table and op (`src`, `ops`: ids),
    order key, whether it is its event's only contribution and counted as its change
    (`single`), and its key's values (`v0`...)."""
    ok = batch.column("order_key")
    op = batch.column("op")
    usable = pc.and_(
        pc.fill_null(pc.greater(pc.binary_length(ok), 0), False),
        pc.fill_null(pc.not_equal(op, "ddl"), False),
    )
    pk_text = _pk_texts(batch.column("pk"))
    usable = pc.and_(usable, pc.is_valid(pk_text))
    if not pc.any(usable).as_py():
        return []
    rows, out = np.arange(base, base + batch.num_rows, dtype=np.int64), []
    narrow = batch.select(["before", "after", "op", "order_key"])  # not the types, raw columns
    for text in pc.unique(pc.filter(pk_text, usable)).to_pylist():
        mask = pc.and_(usable, pc.fill_null(pc.equal(pk_text, text), False))
        keep = mask.to_numpy(zero_copy_only=False)
        part = narrow if keep.all() else narrow.filter(mask)
        names = tuple(_unescaped(n) for n in text.split(_SEP))
        before, after = part.column("before"), part.column("after")
        pop = part.column("op")
        has_after = pc.is_valid(after)
        full_before = pc.is_valid(before)
        a_vals, b_vals = [], []
        for c in names:
            a_vals.append(_lookup(after, c)[0])
            b, held = _lookup(before, c)
            b_vals.append(b)
            full_before = pc.and_(full_before, held)
        moved = pc.invert(has_after)
        for a, b in zip(a_vals, b_vals, strict=True):
            moved = pc.or_(moved, _null_safe_differ(a, b))
        is_delete = pc.equal(pop, "delete")
        removes = pc.is_in(pop, pa.array(["update", "delete"]))
        tomb = pc.and_(pc.and_(removes, full_before), pc.or_(is_delete, moved))
        single = pc.or_(
            pc.and_(has_after, pc.invert(tomb)),
            pc.and_(pc.and_(tomb, pc.invert(has_after)), is_delete),
        )
        head = {
            "row": pa.array(rows[keep]),
            "src": pa.array(src[keep]),
            "op": pa.array(ops[keep]),
            "ok": part.column("order_key"),
            "single": single,
        }
        for slot, made, vals in ((0, has_after, a_vals), (1, tomb, b_vals)):
            if not pc.any(made).as_py():
                continue
            cols = {**head, "slot": pa.array(np.full(part.num_rows, slot, dtype=np.int8))}
            cols.update((f"v{j}", v) for j, v in enumerate(vals))
            out.append((names, pa.table(cols).filter(made)))
    return out


def _key_ids(t: pa.Table, k: int) -> np.ndarray:
    """Per contribution, a dense id of its key: source table and the values of its `k` key
    columns (NULL a value of its own)."""
    kid = t.column("src").to_numpy().astype(np.int64)
    for j in range(k):
        enc = pc.dictionary_encode(t.column(f"v{j}").combine_chunks())
        kid = kid * (len(enc.dictionary) + 1) + _indices(enc) + 1
        if len(kid) and int(kid.max()) >= 4 * len(kid) + 16:  # kept dense, and far from overflow
            _, kid = np.unique(kid, return_inverse=True)
    return kid.astype(np.int64)


class Prefold:
    """What a decode task needs to find its superseded events: each event batch's contributions
    as it is written (`add`), and at the end the fold (`finish`)."""

    def __init__(self) -> None:
        self.parts: dict[tuple[str, ...], list[pa.Table]] = {}
        self.rows = 0
        self.sources = _Ids()
        self.ops = _Ids()
        self.held: list[pa.RecordBatch] | None = []
        """The event batches, while they take at most `HOLD_BYTES` (None: more; the winners
        are then read back from the task's event file)."""
        self.held_bytes = 0

    def add(self, batch: pa.RecordBatch) -> None:
        """An event batch, in the order the task's event file gets its rows."""
        if self.held is not None:
            kept = batch.select(list(WINNER_COLUMNS))
            self.held.append(kept)
            self.held_bytes += kept.nbytes
            if self.held_bytes > HOLD_BYTES:
                self.held = None
        if batch.num_rows:
            src = self.sources.encode(batch.column("db"), batch.column("tbl"))
            ops = self.ops.encode(batch.column("op"))
            for names, narrow in _narrow(batch, self.rows, src, ops):
                self.parts.setdefault(names, []).append(narrow)
        self.rows += batch.num_rows

    def finish(self) -> Superseded | None:
        """The fold of the task's events (None: nothing superseded)."""
        found = [f for names, parts in self.parts.items() if (f := self._fold(len(names), parts))]
        self.parts = {}
        if not found:
            return None
        rows = np.concatenate([f[0] for f in found])
        counts: Counter[tuple[str | None, str | None, str]] = Counter()
        for f in found:
            for (s, o), n in f[4].items():
                db, tbl = self.sources.names[s]
                counts[(db, tbl, str(self.ops.names[o][0]))] += n
        return Superseded(
            batches=self.held,
            rows=np.sort(rows),
            total=self.rows,
            win_rows=np.concatenate([f[1] for f in found]),
            win_slots=np.concatenate([f[2] for f in found]),
            sup=pa.concat_arrays([f[3] for f in found]),
            counts=counts,
        )

    @staticmethod
    def _fold(k: int, parts: list[pa.Table]) -> Any:
        """The fold of the contributions of events that state `k` key columns: (superseded
        event rows, per winning contribution with something superseded its event row, slot and
        the order keys, superseded per (source, op)); None: nothing superseded."""
        t = pa.concat_tables(parts)
        kid = _key_ids(t, k)
        ok = t.column("ok").combine_chunks()
        beaten = _beaten(kid, ok)
        single = t.column("single").to_numpy(zero_copy_only=False)
        sup = single & beaten
        if not sup.any():
            return None
        slots = t.column("slot").to_numpy()
        rows = t.column("row").to_numpy()
        # each key's winner: its newest order key (a tombstone and an image of one event at
        # the same order key: the image, as the merge's (order key, sign) picks it)
        top = np.flatnonzero(~beaten)
        top = top[np.lexsort((slots[top], kid[top]))]
        firsts, first_at = np.unique(kid[top], return_index=True)
        groups = int(kid.max()) + 1
        winner = np.full(groups, -1, dtype=np.int64)
        winner[firsts] = top[first_at]
        where = np.flatnonzero(sup)
        where = where[np.argsort(kid[where], kind="stable")]
        per = np.bincount(kid[where], minlength=groups)
        has = np.flatnonzero(per)
        offsets = np.zeros(len(has) + 1, dtype=np.int32)
        np.cumsum(per[has], out=offsets[1:])
        lists = pa.ListArray.from_arrays(pa.array(offsets), ok.take(pa.array(where)))
        w = winner[has]
        src, op = (t.column(c).to_numpy()[where].astype(np.int64) for c in ("src", "op"))
        width = int(op.max()) + 1
        seen, n = np.unique(src * width + op, return_counts=True)
        src_op = {divmod(int(c), width): int(m) for c, m in zip(seen, n, strict=True)}
        return rows[where], rows[w], slots[w], lists, src_op


def _beaten(kid: np.ndarray, ok: pa.Array) -> np.ndarray:
    """Per contribution, whether another of its key (`kid`) has a newer order key. A task's
    events mostly come in their order: each key's last contribution is found by a sort of the
    key ids (stable), and is its newest unless one before it is not older (then that key's
    newest is found by comparing them all)."""
    order = np.argsort(kid, kind="stable")
    ends = np.flatnonzero(np.append(kid[order][1:] != kid[order][:-1], True))
    last = np.empty(int(kid.max()) + 1, dtype=np.int64)
    last[kid[order][ends]] = order[ends]
    mine = last[kid]
    beaten = pc.less(ok, ok.take(pa.array(mine))).to_numpy(zero_copy_only=False)
    unsure = ~beaten & (mine != np.arange(len(kid)))  # not older than its key's last
    if unsure.any():
        keys = np.unique(kid[unsure])
        among = np.flatnonzero(np.isin(kid, keys))
        best = (
            pa.table({"k": kid[among], "ok": ok.take(pa.array(among))})
            .group_by("k", use_threads=False)
            .aggregate([("ok", "max")])
        )
        newest = np.empty(int(kid.max()) + 1, dtype=np.int64)
        newest[best.column("k").to_numpy()] = np.arange(best.num_rows)
        at = best.column("ok_max").combine_chunks().take(pa.array(newest[kid[among]]))
        beaten[among] = pc.less(ok.take(pa.array(among)), at).to_numpy(zero_copy_only=False)
    return beaten


class Superseded:
    """A task's superseded events (their rows in its event file, sorted), and per winning
    contribution (event row, slot 0 image or 1 tombstone) the order keys it superseded; the
    superseded events per source table and op (`counts`)."""

    def __init__(
        self,
        batches: list[pa.RecordBatch] | None,
        rows: np.ndarray,
        total: int,
        win_rows: np.ndarray,
        win_slots: np.ndarray,
        sup: pa.ListArray,
        counts: Counter[tuple[str | None, str | None, str]],
    ) -> None:
        self.batches, self.rows, self.total = batches, rows, total
        self.win_rows, self.win_slots, self.sup = win_rows, win_slots, sup
        self.counts = counts
        self._by_slot: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def worth_writing(self) -> bool:
        return len(self.rows) >= WORTH * self.total

    def _sup_column(self, slot: int, kept: np.ndarray) -> pa.Array:
        """Per kept event row (`kept`, sorted), the order keys its contribution of `slot`
        superseded (empty: none)."""
        empty = pa.array([[]] * len(kept), SUP_TYPE)
        if slot not in self._by_slot:
            mine = np.flatnonzero(self.win_slots == slot)
            order = mine[np.argsort(self.win_rows[mine], kind="stable")]
            self._by_slot[slot] = (order, self.win_rows[order])
        order, at = self._by_slot[slot]
        if not len(order) or not len(kept):
            return empty
        pos = np.minimum(np.searchsorted(at, kept), len(at) - 1)
        found = at[pos] == kept
        return pc.if_else(pa.array(found), self.sup.take(pa.array(order[pos])), empty)

    def write_winners(self, events: Path, out: Path, **writer: object) -> None:
        """The task's events (its event file `events`, or the batches it was written from,
        when held) without the superseded rows, with `SUP_FIELDS`."""
        src = pq.ParquetFile(events)
        schema = pa.schema([src.schema_arrow.field(c) for c in WINNER_COLUMNS])
        groups: Iterator[pa.Table | pa.RecordBatch] = (
            iter(self.batches)
            if self.batches is not None
            else (
                src.read_row_group(i, columns=list(WINNER_COLUMNS))
                for i in range(src.num_row_groups)
            )
        )
        for f in SUP_FIELDS:
            schema = schema.append(f)
        out.parent.mkdir(parents=True, exist_ok=True)
        base = 0
        kept_parts: list[pa.Table] = []
        with pq.ParquetWriter(out, schema, **writer) as w:
            for group in groups:
                at = np.arange(base, base + group.num_rows, dtype=np.int64)
                base += group.num_rows
                keep = ~np.isin(at, self.rows, assume_unique=True)
                kept = group.filter(pa.array(keep))
                kept_rows = at[keep]
                cols = [
                    *kept.columns,
                    self._sup_column(0, kept_rows),
                    self._sup_column(1, kept_rows),
                ]
                kept_parts.append(pa.table(cols, schema=schema))
            table = pa.concat_tables(kept_parts)
            w.write_table(table, row_group_size=max(1, table.num_rows))
