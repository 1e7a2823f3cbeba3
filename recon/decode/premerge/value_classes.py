"""What a decode task tells the merge about its events' values, so that the merge can skip
the check of every value against its column's published type (`recon.merge.unfit`) when the
decode has already shown that they all fit.

Each non-NULL value of an insert's, update's or snapshot row's after image (the values the
merge checks) is counted under its column, and under its class when it has one: a form of text
whose every value the publish casts read as a value (`recon.merge.unfit.fits`). The test a value
is put to is chosen by the type its event states for the column, where the task has one (a
canonical value of that type, `recon.core.values`, passes it); a value that does not pass, or
whose column's stated type has no test, has no class, and its column is checked by the merge
as before. A test reads the value only: a stated type that is wrong costs the proof, never the
check.

Classes:
- `num:I.F`: `-?[0-9]+(\\.[0-9]+)?`, with I digits before the point and F after (0: no point);
- `date`: `YYYY-MM-DD`, a day of the calendar, the year 1000 to 9999;
- `datetime`: a `date`, `T` or a space, and `hh:mm:ss` (hh < 24, mm and ss < 60), with 1 to 6
  digits of a second after a point or none;
- `tsz`: a `datetime` with `Z` after it (a TIMESTAMP's canonical text);
- `b64`: standard base64 with its padding (a binary value's canonical text);
- `bool`: `true` or `false`.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ALL = "*"
"""The class name under which every non-NULL value of a column is counted."""

CHECKED_OPS = ("insert", "update", "snapshot")
"""The events whose after images the merge checks (`recon.merge.unfit.flag_unfit`)."""

_NUM = r"^-?[0-9]+(\.[0-9]+)?$"
# months 01-12, days 01-31 (the 29th to 31st checked by the calendar after: `_valid_days`),
# hours 00-23, minutes and seconds 00-59
_DAY = r"[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_TIME = r"[ T]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?"
_B64 = r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
_TESTS = {
    "num": _NUM,
    "date": f"^{_DAY}$",
    "datetime": f"^{_DAY}{_TIME}$",
    "tsz": f"^{_DAY}{_TIME}Z$",
    "b64": _B64,
    "bool": "^(true|false)$",
}
_NUMERIC = re.compile(r"^(u?int(8|16|32|64)|year|float(32|64)|decimal\(\d+,\d+\))$")
_BY_TYPE = {"date": "date", "datetime": "datetime", "timestamp": "tsz", "binary": "b64",
            "bool": "bool"}  # fmt: skip


def test_of(stated: str | None) -> str | None:
    """The test a value of a column of stated logical type `stated` is put to (None: none)."""
    if stated is None:
        return None
    return "num" if _NUMERIC.match(stated) else _BY_TYPE.get(stated)


_DAYS = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])


def _digits(v: pa.Array, start: int, end: int) -> np.ndarray:
    return pc.utf8_slice_codeunits(v, start, end).cast(pa.int32()).to_numpy(zero_copy_only=False)


def _valid_days(v: pa.Array, passed: np.ndarray) -> None:
    """Of values that passed a day's pattern (`passed`, cleared where not), those on the 29th
    to 31st read against the calendar (February's 29th: leap years)."""
    late = np.flatnonzero(passed & pc.match_substring_regex(v, "^.{8}(29|3)").to_numpy(
        zero_copy_only=False))  # fmt: skip
    if not len(late):
        return
    sub = v.take(pa.array(late))
    y, m, d = _digits(sub, 0, 4), _digits(sub, 5, 7), _digits(sub, 8, 10)
    leap = (y % 4 == 0) & ((y % 100 != 0) | (y % 400 == 0))
    passed[late] = d <= _DAYS[m - 1] + ((m == 2) & leap)


_CODES = {"date": 1, "datetime": 2, "tsz": 3, "b64": 4, "bool": 5}
_NUM_CODE = 1 << 16  # + digits before the point * 1024 + digits after (each below 1024)


def _class_codes(test: str, v: pa.Array) -> np.ndarray:
    """The class of each value put to `test`, as a code (`class_name`; 0: none, and NULL)."""
    if v.null_count:
        v = pc.fill_null(v, "\x00")  # passes no test
    got = pc.fill_null(pc.match_substring_regex(v, _TESTS[test]), False)
    passed = got.to_numpy(zero_copy_only=False).copy()
    if test in ("date", "datetime", "tsz"):
        _valid_days(v, passed)
    if test != "num":
        return np.where(passed, _CODES[test], 0)
    dot = pc.find_substring(v, ".").to_numpy(zero_copy_only=False)
    length = pc.binary_length(v).to_numpy(zero_copy_only=False).astype(np.int64)
    sign = pc.starts_with(v, "-").to_numpy(zero_copy_only=False).astype(np.int64)
    whole = np.where(dot >= 0, dot, length) - sign
    frac = np.where(dot >= 0, length - dot - 1, 0)
    passed &= (whole < 1024) & (frac < 1024)
    return np.where(passed, _NUM_CODE + whole * 1024 + frac, 0)


def class_name(code: int) -> str | None:
    if code >= _NUM_CODE:
        return f"num:{(code - _NUM_CODE) // 1024}.{(code - _NUM_CODE) % 1024}"
    return next((k for k, c in _CODES.items() if c == code), None)


def _ids(v: pa.Array) -> tuple[np.ndarray, list[str | None]]:
    """Each value's id, and the values by id (NULL a value of its own)."""
    enc = pc.dictionary_encode(v, null_encoding="encode")
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


_READ = ("db", "tbl", "after", "types")


class ValueClasses:
    """A decode task's count of its events' checked values per source table, column and class
    (`add` each event batch; `counts`)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str | None, str | None, str, str]] = Counter()
        """(db, tbl, column, class or `ALL`) -> values."""

    def add(self, batch: pa.RecordBatch) -> None:
        checked = pc.is_in(batch.column("op"), pa.array(CHECKED_OPS))
        batch = batch.select(_READ)  # the columns read: a filter copies no others
        if not pc.all(checked).as_py():
            if not pc.any(checked).as_py():
                return
            batch = batch.filter(checked)
        if not self._add_uniform(batch):
            self._add_entries(batch)

    def _add_uniform(self, batch: pa.RecordBatch) -> bool:
        """A batch of one source table whose images all hold the same columns in one order,
        and whose stated types are the same for every event, counted a column at a time
        (most batches: a decoder's batch of one table's changes); False: it is not one."""
        n = batch.num_rows
        after, types = batch.column("after"), batch.column("types")
        db, tbl = batch.column("db"), batch.column("tbl")
        if after.null_count or types.null_count or db.null_count or tbl.null_count:
            return False
        if pc.count_distinct(db).as_py() != 1 or pc.count_distinct(tbl).as_py() != 1:
            return False
        first = _uniform_names(after)
        if first is None or len(set(first.to_pylist())) != len(first):
            return False
        width = len(first)
        t_first = _uniform_names(types)
        if t_first is None or not t_first.equals(first):
            return False
        t0 = types.offsets[0].as_py()
        stated = types.items.slice(t0, width)
        tiled = pa.array(np.tile(np.arange(width), n))
        if not pc.all(pc.equal(types.items.slice(t0, n * width), stated.take(tiled))).as_py():
            return False
        a0 = after.offsets[0].as_py()
        where = (db[0].as_py(), tbl[0].as_py())
        for slot, (name, typ) in enumerate(zip(first.to_pylist(), stated.to_pylist(), strict=True)):
            test = test_of(typ)
            if test is None and not after.items.null_count:
                self.counts[(*where, name, ALL)] += n  # no value to test, none NULL
                continue
            values = after.items.take(pa.array(np.arange(a0 + slot, a0 + n * width, width)))
            present = len(values) - values.null_count
            if not present:
                continue
            self.counts[(*where, name, ALL)] += present
            if test is not None:
                self._count_codes(where, name, _class_codes(test, values))
        return True

    def _count_codes(
        self, where: tuple[str | None, str | None], name: str, codes: np.ndarray
    ) -> None:
        counted = pc.value_counts(pa.array(codes))
        for code, c in zip(counted.field(0).to_pylist(), counted.field(1).to_pylist(), strict=True):
            cls = class_name(code)
            if cls is not None:
                self.counts[(*where, name, cls)] += c

    def _add_entries(self, batch: pa.RecordBatch) -> None:
        """Any batch, entry by entry (of vectors)."""
        after, types = batch.column("after"), batch.column("types")
        offs = after.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        valid = pc.is_valid(after).to_numpy(zero_copy_only=False)
        lengths = np.where(valid, np.diff(offs), 0)
        total = int(lengths.sum())
        if not total:
            return
        # the entries of the images (a NULL image's, if any, left out), and their event
        rows = np.repeat(np.arange(len(after)), lengths)
        slot = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        at = pa.array(offs[rows] + slot)
        names, values = after.keys.take(at), after.items.take(at)
        stated = _stated(types, names, rows, slot)
        codes = np.zeros(total, np.int64)
        st_ids, st_names = _ids(stated)
        for test in {x for t in st_names if (x := test_of(t)) is not None}:
            mine = [i for i, t in enumerate(st_names) if test_of(t) == test]
            where = np.flatnonzero(np.isin(st_ids, mine))
            codes[where] = _class_codes(test, values.take(pa.array(where)))
        db, dbs = _ids(batch.column("db"))
        tbl, tbls = _ids(batch.column("tbl"))
        name, name_list = _ids(names)
        present = pc.is_valid(values).to_numpy(zero_copy_only=False)
        code_list, code = np.unique(codes, return_inverse=True)
        src = (db * len(tbls) + tbl)[rows]
        key = ((src * len(name_list) + name) * len(code_list) + code)[present]
        found, n = np.unique(key, return_counts=True)
        for k, c in zip(found.tolist(), n.tolist(), strict=True):
            k, ci = divmod(k, len(code_list))
            s, ni = divmod(k, len(name_list))
            d, t = divmod(s, len(tbls))
            at_ = (dbs[d], tbls[t], name_list[ni])
            self.counts[(*at_, ALL)] += c
            cls = class_name(int(code_list[ci]))
            if cls is not None:
                self.counts[(*at_, cls)] += c


def _uniform_names(img: pa.MapArray) -> pa.Array | None:
    """The names of the first of `img` (no NULL image) when every image holds those names
    in that order (None: not so)."""
    offs = img.offsets.to_numpy(zero_copy_only=False)
    n = len(img)
    width = int(offs[1] - offs[0]) if n else 0
    if not n or not width or int(offs[-1] - offs[0]) != n * width:
        return None
    if not np.array_equal(np.diff(offs), np.full(n, width)):
        return None
    first = img.keys.slice(int(offs[0]), width)
    tiled = pa.array(np.tile(np.arange(width), n))
    same = pc.equal(img.keys.slice(int(offs[0]), n * width), first.take(tiled))
    return first if pc.all(same).as_py() else None


def _stated(types: pa.MapArray, names: pa.Array, rows: np.ndarray, slot: np.ndarray) -> pa.Array:
    """The stated type of each image entry (`names`, of event `rows`, at `slot` in its image):
    the entry at the same slot of the event's types where that holds the same name (the
    decoders write both in the column order), else looked up by name (NULL: none stated).
    Only the test a value is put to follows it (any stated type gives a right answer)."""
    t_offs = types.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    t_len = np.where(pc.is_valid(types).to_numpy(zero_copy_only=False), np.diff(t_offs), 0)
    if not t_len.sum():
        return pa.nulls(len(names), pa.string())
    inside = slot < t_len[rows]
    at = pa.array(np.where(inside, t_offs[rows] + slot, 0))
    same = pc.fill_null(pc.and_(pa.array(inside), pc.equal(types.keys.take(at), names)), False)
    out = pc.if_else(same, types.items.take(at), pa.scalar(None, pa.string()))
    rest = np.flatnonzero(~same.to_numpy(zero_copy_only=False) & (t_len[rows] > 0))
    if not len(rest):
        return out
    # types of another column order than the image's: joined by (event, name)
    t_rows = np.repeat(np.arange(len(types)), t_len)
    t_slot = np.arange(len(t_rows)) - np.repeat(np.cumsum(t_len) - t_len, t_len)
    t_at = pa.array(t_offs[t_rows] + t_slot)
    stated = (
        pa.table({"row": t_rows, "name": types.keys.take(t_at), "type": types.items.take(t_at)})
        .group_by(["row", "name"], use_threads=False)
        .aggregate([("type", "first")])
    )
    wanted = pa.table({"i": rest, "row": rows[rest], "name": names.take(pa.array(rest))})
    found = wanted.join(stated, ["row", "name"], use_threads=False)
    merged = out.to_numpy(zero_copy_only=False).astype(object)
    merged[found.column("i").to_numpy()] = found.column("type_first").to_numpy(zero_copy_only=False)
    return pa.array(merged, pa.string())
