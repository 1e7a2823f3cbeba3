"""The decode's classes of the values the merge checks (`recon.decode.premerge.value_classes`), against a
reference written here in plain Python (`re` and the calendar of `datetime`): over batches of
one table whose images share their columns and types (counted a column at a time) and over
mixed batches (entry by entry: several tables, images of other column orders, types in
another order than the image, a name held twice, NULL images and values, deletes)."""

from __future__ import annotations

import re
from collections import Counter
from datetime import date
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from recon.core.model import EVENT_SCHEMA
from recon.decode.premerge.value_classes import ALL, ValueClasses
from tests.support.examples import examples

NUMERIC = ("int8", "int16", "int32", "int64", "uint32", "uint64", "year", "float32",
           "float64", "decimal(10,2)")  # fmt: skip
STATED = (*NUMERIC, "date", "datetime", "timestamp", "binary", "bool", "string", "json", None)

_DAY = r"([0-9]{4})-([0-9]{2})-([0-9]{2})"
_TIME = r"[ T]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?"
_B64 = r"([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"


def _day(m: re.Match[str]) -> bool:
    y, mo, d = (int(m.group(i)) for i in (1, 2, 3))
    try:
        date(y, mo, d)
    except ValueError:
        return False
    return y >= 1000


def _time(m: re.Match[str]) -> bool:
    return int(m.group(4)) < 24 and int(m.group(5)) < 60 and int(m.group(6)) < 60


def reference(value: str, stated: str | None) -> str | None:
    """The class the reference gives `value` of a column of type `stated`."""
    if stated in NUMERIC:
        m = re.fullmatch(r"-?([0-9]+)(?:\.([0-9]+))?", value)
        return m and f"num:{len(m.group(1))}.{len(m.group(2) or '')}"
    if stated == "date":
        m = re.fullmatch(_DAY, value)
        return "date" if m and _day(m) else None
    if stated in ("datetime", "timestamp"):
        m = re.fullmatch(_DAY + _TIME + ("Z" if stated == "timestamp" else ""), value)
        ok = m and _day(m) and _time(m)
        return ("tsz" if stated == "timestamp" else "datetime") if ok else None
    if stated == "binary":
        return "b64" if re.fullmatch(_B64, value) else None
    if stated == "bool":
        return "bool" if value in ("true", "false") else None
    return None


def expected(events: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    for e in events:
        if e["op"] not in ("insert", "update", "snapshot") or e["after"] is None:
            continue
        types = e["types"] or []
        for i, (name, value) in enumerate(e["after"]):
            if value is None:
                continue
            # the type at the entry's place when it names the entry, else its name's first
            at = types[i] if i < len(types) and types[i][0] == name else None
            stated = at[1] if at else next((t for k, t in types if k == name), None)
            out[(e["db"], e["tbl"], name, ALL)] += 1
            cls = reference(value, stated)
            if cls is not None:
                out[(e["db"], e["tbl"], name, cls)] += 1
    return out


def counted(events: list[dict[str, Any]], chunk: int) -> Counter[tuple[Any, ...]]:
    table = pa.Table.from_pylist(events, schema=EVENT_SCHEMA)
    got = ValueClasses()
    for batch in table.to_batches(max_chunksize=chunk):
        got.add(batch)
    return got.counts


def _event(db: str, tbl: str, op: str, after: Any, types: Any) -> dict[str, Any]:
    return {"db": db, "tbl": tbl, "op": op, "before": None, "after": after, "types": types,
            "pk": ["a"], "order_key": b"\x01", "topic": "t", "partition": 0,
            "offset": 0}  # fmt: skip


EDGES = [
    "0", "-0", "7", "-42", "123456789", "1234567890", "000123", "12.5", "-0.25", "1.", ".5",
    "1e5", "+1", " 1", "1 ", "12\n", "１２", "9" * 40, "1." + "0" * 7,
    "2024-02-29", "2023-02-29", "2024-02-30", "2024-04-31", "2024-12-31", "0999-01-01",
    "1000-01-01", "9999-12-31", "2024-13-01", "2024-00-10", "2024-1-01", "2024-01-01 ",
    "2024-01-01 00:00:00", "2024-01-01T23:59:59.999999", "2024-01-01 24:00:00",
    "2024-01-01 12:60:00", "2024-01-01 12:00:60", "2024-01-01 12:00:00.1234567",
    "2024-01-01 12:00:00.", "2024-01-31T10:00:00Z", "2023-02-29T10:00:00Z",
    "2024-01-01T10:00:00+00:00", "2024-01-01T10:00:00z",
    "", "YQ==", "YWI=", "YWJj", "YQ", "YQ=", "Y===", "YQ==YQ==", "a+/9", "a-_9", "YQ==\n",
    "true", "false", "True", "1", "t", "null",
]  # fmt: skip
values = st.one_of(
    st.sampled_from(EDGES),
    st.from_regex(r"-?[0-9]{1,25}(\.[0-9]{0,12})?", fullmatch=True),
    st.from_regex(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,8})?Z?)?",
        fullmatch=True,
    ),  # fmt: skip
    st.from_regex(r"[A-Za-z0-9+/=]{0,12}", fullmatch=True),
    st.text(max_size=6),
)
maybe_value = st.one_of(st.none(), values)


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(st.sampled_from(STATED), min_size=1, max_size=4),
    st.lists(st.lists(maybe_value, min_size=4, max_size=4), min_size=1, max_size=30),
    st.integers(1, 9),
)
def test_a_uniform_stream_is_classed_as_the_reference_classes_it(
    stated: list[str | None], rows: list[list[str | None]], chunk: int
) -> None:
    """A table's changes whose images and types all hold the same columns in one order (the
    column-at-a-time count)."""
    names = [f"c{i}" for i in range(len(stated))]
    types = [(n, t or "string") for n, t in zip(names, stated, strict=True)]
    events = [_event("d", "t", "update", list(zip(names, r, strict=False)), types) for r in rows]
    assert counted(events, chunk) == expected(events)


entry = st.tuples(st.sampled_from(["a", "b", "c"]), maybe_value)
mixed_event = st.builds(
    _event,
    st.sampled_from(["d1", "d2"]),
    st.sampled_from(["t1", "t2"]),
    st.sampled_from(["insert", "update", "snapshot", "delete"]),
    st.one_of(st.none(), st.lists(entry, max_size=4)),
    st.one_of(
        st.none(),
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b", "c"]), st.sampled_from([t or "string" for t in STATED])
            ),
            max_size=4,
        ),
    ),  # fmt: skip
)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(mixed_event, min_size=1, max_size=25), st.integers(1, 9))
def test_any_batch_is_classed_as_the_reference_classes_it(
    events: list[dict[str, Any]], chunk: int
) -> None:
    """Several tables, images of other column orders or a name held twice (every entry is
    counted; the merge reads the first), types in another order or missing, NULL images."""
    assert counted(events, chunk) == expected(events)


def test_the_edges_are_classed_as_the_reference_classes_them() -> None:
    """Every edge value under every stated type, in one uniform batch per type."""
    for stated in STATED:
        events = [_event("d", "t", "insert", [("c", v)], [("c", stated or "string")])
                  for v in EDGES]  # fmt: skip
        got = counted(events, 64)
        assert got == expected(events), stated
        if stated == "date":  # the calendar is read: the 29th of February in a leap year only
            assert got[("d", "t", "c", "date")] == 4  # 2024-02-29, 2024-12-31, 1000, 9999
