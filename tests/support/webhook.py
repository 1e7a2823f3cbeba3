"""A local HTTP server that takes Slack incoming-webhook posts (JSON) and keeps them, for the
alert tests: Airflow's Slack notifier posts to it through a `slackwebhook` connection."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "T000/B000/recon-test"


class WebhookSink:
    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sink.posts.append((self.path, json.loads(body or b"{}")))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok")  # what Slack answers

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def texts(self) -> list[str]:
        """The messages posted to the connection's path, in order."""
        return [str(p.get("text")) for path, p in self.posts if path == f"/services/{TOKEN}"]

    def connection(self) -> str:
        """An Airflow Slack incoming-webhook connection (JSON) to this server."""
        host = f"http://127.0.0.1:{self.port}/services"
        return json.dumps({"conn_type": "slackwebhook", "host": host, "password": TOKEN})

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
