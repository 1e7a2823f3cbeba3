"""One writer per pipeline: the merge state, the published tables and the audit table of a
pipeline are changed by one process at a time.

`pipeline_lock` takes an exclusive `flock` on `_state/<p>/writer.lock` (a file beside the state,
so every process that sees the warehouse sees the lock; on NFS this needs working `flock`). A
second writer waits up to `wait_s` seconds (the DAG's tasks: `RECON_LOCK_WAIT_S`, default 30 min,
so a backfill's runs queue behind each other), or, run by hand (`wait_s` 0), stops at once with
one line naming who holds it. The manifest's version check (`save_manifest`) is the second net:
a writer that lost the race fails loudly instead of overwriting.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from recon.config import PipelineConfig
from recon.errors import PipelineBusy

DAG_WAIT_S = float(os.environ.get("RECON_LOCK_WAIT_S", "1800"))


@contextmanager
def pipeline_lock(cfg: PipelineConfig, command: str, wait_s: float = 0) -> Iterator[None]:
    state = cfg.layout.state
    state.mkdir(parents=True, exist_ok=True)
    holder_file = state / "writer.json"
    fd = os.open(state / "writer.lock", os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise PipelineBusy(_busy(cfg, holder_file, command)) from None
                time.sleep(1)
        holder = {
            "command": command,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        holder_file.write_text(json.dumps(holder))
        try:
            yield
        finally:
            holder_file.unlink(missing_ok=True)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _busy(cfg: PipelineConfig, holder_file: os.PathLike[str], command: str) -> str:
    try:
        h = json.loads(open(holder_file, encoding="utf-8").read())
        who = f"`{h['command']}` (pid {h['pid']} on {h['host']}, since {h['since']})"
    except (OSError, ValueError, KeyError):
        who = "another process"
    return (
        f"pipeline {cfg.name} is being written by {who}; {command} was not started: wait for "
        "it to finish and run it again (the DAG's tasks wait for each other)"
    )
