"""Named pause points for crash tests: with `RECON_PAUSE_AT=<name>`, a run that reaches that
point writes `RECON_PAUSE_FILE` and waits, so a test can kill the real process exactly there."""

from __future__ import annotations

import os
import time
from pathlib import Path

POINTS = ("merge:state-written", "publish:files-written", "merge:published")
DECODE_POINTS = ("decode:staged", "decode:outputs-replaced")


def checkpoint(name: str) -> None:
    if os.environ.get("RECON_PAUSE_AT") != name:
        return
    marker = os.environ.get("RECON_PAUSE_FILE")
    if marker:
        Path(marker).write_text(name)
    time.sleep(3600)
