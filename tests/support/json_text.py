"""For the tests of the lanes' C reads: JSON written as a test needs it (members in any order
or twice, text as it is: escapes, -0, fractions, invalid JSON), a message damaged byte by
byte, and a format module's read in Python alone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import orjson
from hypothesis import strategies as st


class Obj:
    """A JSON object as written: its members in order, a name maybe twice."""

    def __init__(self, *pairs: tuple[Any, Any]) -> None:
        self.pairs = list(pairs)


class Raw:
    """JSON text as it is (escapes, -0, fractions, invalid text)."""

    def __init__(self, text: str) -> None:
        self.text = text


def json_text(v: Any, sp: str = "") -> str:
    """`v` as JSON text (`Obj`, `Raw`, lists, scalars), with `sp` around each member's colon
    and comma."""
    if isinstance(v, Raw):
        return v.text
    if isinstance(v, Obj):
        members = [f"{json_text(k, sp)}{sp}:{sp}{json_text(x, sp)}" for k, x in v.pairs]
        return "{" + sp + f",{sp}".join(members) + sp + "}"
    if isinstance(v, list):
        return "[" + ",".join(json_text(x, sp) for x in v) + "]"
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return orjson.dumps(v).decode()


def attempt(read: Any) -> Any:
    """`read()`, or "error" when it raises (either read, C's or Python's, may refuse so)."""
    try:
        return read()
    except Exception:  # noqa: BLE001 - either read may refuse by raising
        return "error"


@contextmanager
def python_only(module: ModuleType) -> Iterator[None]:
    """A format module's lane without its C read (`_native`), as a checkout not set up has it."""
    native, module._native = module._native, None  # type: ignore[attr-defined]
    try:
        yield
    finally:
        module._native = native  # type: ignore[attr-defined]


def agreeing(value: bytes, c: Any, py: Any) -> Any:
    """C's answer `c` to `value`, checked against Python's `py`: the same, or None (left to
    Python), or an error where Python's is one or None."""
    assert c is None or c == py or c == "error" and py in (None, "error"), (value, c, py)
    return c


def damaged(data: st.DataObject, original: bytes, start: int, extra: bytes = b"") -> bytes:
    """`original` with a byte changed, cut out or added at `start` or after it; the byte one of
    JSON's structure, digits, letters of its literals (and `extra`), or not UTF-8."""
    at = data.draw(st.integers(start, len(original) - 1))
    how = data.draw(st.sampled_from(["change", "cut", "add"]))
    byte = bytes([data.draw(st.sampled_from([*b'{}[]",:\\ 0-9aentul', *extra, 0x80, 0xC3, 0xFF]))])
    if how == "change":
        return original[:at] + byte + original[at + 1 :]
    if how == "cut":
        return original[:at] + original[at + 1 :]
    return original[:at] + byte + original[at:]
