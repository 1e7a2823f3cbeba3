"""How many examples a property test draws: as its `@settings` says, or a tenth (at least ten)
under `make test-unit` (`RECON_QUICK_TESTS=1`: the whole unit suite in well under a minute)."""

from __future__ import annotations

import os


def examples(n: int) -> int:
    return max(10, n // 10) if os.environ.get("RECON_QUICK_TESTS") == "1" else n
