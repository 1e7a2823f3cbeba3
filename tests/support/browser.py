"""A headless Chromium driven over the DevTools protocol (websockets, no extra driver): enough to
log into the Airflow UI like a user and read what a page shows, iframes included."""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import connect


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        exe = shutil.which(name)
        if exe:
            return exe
    raise RuntimeError(
        "no chromium on PATH; run scripts/system-packages.sh tests (Debian's chromium)"
    )


class Browser:
    def __init__(self) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="recon-chromium-"))
        self.proc = subprocess.Popen(
            [
                chromium(),
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.time() + 30
        while not port_file.is_file() or not port_file.read_text().strip():
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(
            connect(pages[0]["webSocketDebuggerUrl"], max_size=None)
        )
        self._ids = itertools.count(1)
        self.send("Page.enable")
        self.send("Runtime.enable")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self._ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def js(self, expression: str) -> Any:
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return r.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        """Poll a JS expression until it is truthy; its value."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                v = self.js(expression)
            except RuntimeError:
                v = None
            if v:
                return v
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {expression!r} on {self.js('location.href')}")

    def type_into(self, selector: str, text: str) -> None:
        """Focus an input and type, the way a user would (React sees real input events)."""
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", text=text)

    def frame_texts(self) -> list[str]:
        """The text of every iframe document in the page (sandboxed ones too), via the DOM
        domain: a page's scripts cannot read a sandboxed frame, the browser can."""
        root = self.send("DOM.getDocument", depth=-1, pierce=True)["root"]
        out: list[str] = []

        def text_of(node: dict[str, Any]) -> str:
            if node.get("nodeType") == 3:
                return str(node.get("nodeValue", ""))
            if node.get("nodeName") in ("STYLE", "SCRIPT"):
                return ""
            return " ".join(text_of(c) for c in node.get("children", []))

        def walk(node: dict[str, Any]) -> None:
            if node.get("nodeName") == "IFRAME" and node.get("contentDocument"):
                out.append(" ".join(text_of(node["contentDocument"]).split()))
            for c in node.get("children", []):
                walk(c)
            if node.get("contentDocument"):
                walk(node["contentDocument"])

        walk(root)
        return out

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)
