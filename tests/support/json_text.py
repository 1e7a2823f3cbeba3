"""JSON written as a test needs it: members in any order or twice, and text as it is (escapes,
-0, fractions, invalid JSON), for the tests of the lanes' C reads."""

from __future__ import annotations

from typing import Any

import orjson


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
