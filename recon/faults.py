"""Named fault points for crash and retry tests.

With `RECON_PAUSE_AT=<name>`, a run that reaches that point writes `RECON_PAUSE_FILE` and
waits, so a test can kill the real process exactly there. With `RECON_FAIL_ONCE=<name>`, the
first process (a Spark task's Python worker, say) to reach that point creates
`RECON_FAIL_FILE` and raises, so Spark retries the task."""

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


TASK_POINTS = ("decode:task-files-written", "decode:hashes-written-aside")


def fail_once(name: str) -> None:
    if os.environ.get("RECON_FAIL_ONCE") != name:
        return
    marker = os.environ.get("RECON_FAIL_FILE")
    if not marker:
        return
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # one process wins
    except FileExistsError:
        return
    raise RuntimeError(f"injected failure at {name} (RECON_FAIL_ONCE)")
