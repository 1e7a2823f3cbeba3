"""A local SMTP server (aiosmtpd) that keeps what it receives, for the alert tests."""

from __future__ import annotations

import email
import json
import socket
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller


class _Keep:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.messages.append((list(envelope.rcpt_tos), email.message_from_bytes(envelope.content)))
        return "250 OK"


class SmtpSink:
    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._keep = _Keep()
        self._controller = Controller(self._keep, hostname="127.0.0.1", port=self.port)
        self._controller.start()

    @property
    def messages(self) -> list[tuple[list[str], Message]]:
        return self._keep.messages

    def connection(self) -> str:
        """Airflow's `smtp_default` connection (JSON) to this server: no TLS, no login."""
        extra = {"disable_ssl": True, "disable_tls": True, "from_email": "recon@test"}
        return json.dumps(
            {"conn_type": "smtp", "host": "127.0.0.1", "port": self.port, "extra": extra}
        )

    def stop(self) -> None:
        self._controller.stop()
