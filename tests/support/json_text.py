"""For the tests of the lanes' C reads: JSON written as a test needs it (members in any order
or twice, text as it is: escapes, -0, fractions, invalid JSON), a message damaged byte by
byte, and a format module's read in Python alone."""

from __future__ import annotations

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


def agreeing(value: bytes, c: Any, py: Any) -> Any:
    """C's answer `c` to `value`, checked against the decoder's `py` (in the lane's form): the
    same, or None (left to the decoder), or an error where the decoder's is one or None."""
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


def rare(draw: st.DrawFn) -> bool:
    """One of the hostile variations, each drawn on its own: most messages have few."""
    return draw(st.integers(0, 7)) == 0


def hostile_members(
    draw: st.DrawFn, pairs: list[tuple[Any, Any]], values: st.SearchStrategy[Any]
) -> list[tuple[Any, Any]]:
    """An image's members, now and then in another order, without the first, with a name no
    schema has, with the first written twice (a value of `values`), or with the first's name
    written with escapes."""
    if rare(draw):
        pairs = draw(st.permutations(pairs))
    if rare(draw):
        pairs = pairs[1:]
    if rare(draw):
        pairs.append(("zz", 1))
    if pairs and rare(draw):
        pairs.append((pairs[0][0], draw(values)))
    if pairs and rare(draw):
        key = orjson.dumps(pairs[0][0]).decode()
        pairs[0] = (Raw(key.replace("d", "\\u0064").replace("a", "\\u0061")), pairs[0][1])
    return pairs


def hostile_layout(
    draw: st.DrawFn, pairs: list[tuple[Any, Any]]
) -> tuple[list[tuple[Any, Any]], str, str]:
    """A payload's members, now and then one written twice (the last counts) or in another
    order; the whitespace around its members' colons and commas; and what follows it in the
    envelope (nothing, or whitespace, text, another member, a stray bracket)."""
    if rare(draw):
        pairs.append(draw(st.sampled_from(pairs)))
    if rare(draw):
        pairs = draw(st.permutations(pairs))
    sp = draw(st.sampled_from(["", " ", "\n\t"])) if rare(draw) else ""
    end = ""
    if rare(draw):
        end = draw(st.sampled_from([" \n", "x", "}", ',"schema":null', ',"x":1', ",", "]"]))
    return pairs, sp, end
