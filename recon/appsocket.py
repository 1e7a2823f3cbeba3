"""The wire between a DAG run's Spark application (`recon.ops.app_server`) and the tasks that
use it: one JSON line each way over a Unix socket, the application's log followed meanwhile.
Standard library only: the Airflow tasks import it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

IDLE_S = 600.0
"""An application with no request for this long exits (its teardown never came: a scheduler
killed, a run marked failed by hand)."""


END_MARK = "recon app: stage done"
"""The driver's last line for a stage (after its output, before its answer)."""


class AppGone(Exception):
    """The application ended while it ran a request."""


SHARED_VAR = "RECON_SPARK_APP_SHARED"
"""`true` (a folder under the temp folder) or a folder: a DAG run takes an application an
earlier run left serving, where there is one (`recon.airflow.spark_app`)."""
APP_INFO = "app.json"
"""A shared application's folder: where to reach it (`recon.airflow.spark_app`)."""
LEASE = "leased_by"
"""A shared application's folder: the run using it (none: free for the next run)."""


READ_S = 10.0
"""A request's line must arrive within this long (a client that connects and hangs is dropped,
not waited for: the application serves one request at a time)."""


def read_line(conn: socket.socket, timeout_s: float = READ_S) -> dict[str, Any]:
    """One request, or {} for nothing readable in `timeout_s` (a probe, a hung client)."""
    conn.settimeout(timeout_s)
    buf = b""
    while b"\n" not in buf:
        try:
            chunk = conn.recv(65536)
        except (TimeoutError, OSError):
            return {}
        if not chunk:
            break
        buf += chunk
    conn.settimeout(None)  # the answer waits for the stage, however long it takes
    try:
        doc = json.loads(buf.decode("utf-8") or "{}")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _line(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode("utf-8") + b"\n"


def send(conn: socket.socket, doc: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # the task was killed meanwhile
        conn.sendall(_line(doc))


def reachable(sock_path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(sock_path)
        except OSError:
            return False
    return True


def request(
    sock_path: str,
    payload: dict[str, Any],
    log_path: str | None = None,
    on_line: Callable[[str], None] | None = None,
    poll_s: float = 0.5,
    timeout_s: float | None = None,
) -> int | None:
    """Send one request; the exit code. None: the application cannot be reached (the caller
    runs spark-submit instead). `on_line` gets each line the application logs meanwhile.
    Raises AppGone when it ended before answering, TimeoutError after `timeout_s`."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(sock_path)
    except OSError:
        s.close()
        return None
    tail = _Tail(log_path, on_line)
    with s:
        s.sendall(_line(payload))
        s.settimeout(poll_s)
        buf = b""
        while b"\n" not in buf:
            tail.follow()
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                if deadline is not None and time.monotonic() > deadline:
                    raise
                continue
            if not chunk:
                break
            buf += chunk
    try:
        rc = int(json.loads(buf.decode("utf-8"))["rc"])
    except (ValueError, KeyError, TypeError):
        tail.follow(final=True)
        raise AppGone("the run's Spark application ended before the stage did") from None
    # the driver's output reaches the log through Spark's JVM, which may still be copying it
    # when the answer arrives: follow the log to the driver's closing line (a few seconds at
    # most)
    end = time.monotonic() + 5
    while not tail.closed() and time.monotonic() < end:
        time.sleep(0.05)
        tail.follow()
    tail.follow(final=True)
    return rc


class _Tail:
    """The log's lines from where it ended when the request was sent."""

    def __init__(self, path: str | None, on_line: Callable[[str], None] | None) -> None:
        self.path, self.on_line = path, on_line
        self.offset = _size(path)
        self.partial = b""
        self.marked = False

    def closed(self) -> bool:
        """The driver's closing line for the stage came (or there is nothing to follow)."""
        return self.path is None or self.on_line is None or self.marked

    def follow(self, final: bool = False) -> None:
        if self.path is None or self.on_line is None:
            return
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        if final and self.partial:
            lines.append(self.partial)
            self.partial = b""
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            self.marked = self.marked or line.startswith(END_MARK)
            self.on_line(line)


def _size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def wait_ready(sock_path: str, alive: Callable[[], bool], timeout_s: float) -> bool:
    """Until the application listens (True), ends or times out (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if os.path.exists(sock_path) and reachable(sock_path):
            return True
        if not alive():
            return False
        time.sleep(0.2)
    return False


def is_app_process(pid: int, sock_path: str) -> bool:
    """`pid` is still the application serving `sock_path` (not a recycled process id)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return sock_path.encode() in cmdline


def stop_process(pid: int, sock: str, timeout_s: float | None = 60.0) -> None:
    """Ask the application to stop (it exits on its own once it answered); kill its process
    group when it does not answer in `timeout_s` (a stage still running in it: its task was
    killed)."""
    try:
        if request(sock, {"stop": True}, poll_s=0.2, timeout_s=timeout_s) == 0:
            return
    except Exception:  # no answer: killed below
        pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not is_app_process(pid, sock):
            break
        with contextlib.suppress(OSError):
            os.killpg(pid, sig)
        for _ in range(50):
            if not is_app_process(pid, sock):
                break
            time.sleep(0.2)


def stop_shared_apps(folder: str, timeout_s: float = 60.0) -> int:
    """Stop the shared applications under `folder` (`recon.airflow.spark_app.shared_folder`)
    (`stop_process`). How many were serving."""
    stopped = 0
    for info_path in sorted(Path(folder).glob(f"*/{APP_INFO}")):
        try:
            info = json.loads(info_path.read_text(encoding="utf-8"))
            pid, sock = int(info["pid"]), str(info["socket"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if is_app_process(pid, sock):
            stopped += 1
            stop_process(pid, sock, timeout_s)
    return stopped
