"""The package's C modules: each fast format's one fast read (`_<format>_lane.c`) and the
dumps' content hashes (`_run_hashes.c`), compiled by the packaging (`setup.py`'s
`ext_modules`: `pip install .`, `pip wheel .`, `make setup`).

A module that is missing is said once, loudly, on stderr (a task's log): decoding still gives
the same rows (every format's decoder reads every record), several times slower."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

_said: set[str] = set()


def native_module(name: str) -> ModuleType | None:
    """`recon.decode.formats.<name>`, or None (said once) when it was not built."""
    try:
        return importlib.import_module(f"recon.decode.formats.{name}")
    except ImportError as err:
        if name not in _said:
            _said.add(name)
            msg = (
                f"recon: WARNING: the C module {name} is not built ({err}); decoding runs "
                "without it, several times slower: run `make setup` (or `pip install .`, "
                "with a C compiler and Python's headers)"
            )
            print(msg, file=sys.stderr)
        return None
