"""A StatsD listener on 127.0.0.1 (UDP): what Airflow's metrics client sends, line by line."""

from __future__ import annotations

import socket
import threading


class StatsdSink:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            self.lines.extend(data.decode("utf-8", "replace").splitlines())

    def env(self) -> dict[str, str]:
        """Airflow's configuration that sends its metrics here."""
        return {
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(self.port),
            "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        }

    def values(self, name: str) -> list[str]:
        """The values sent for metric `name` (`<name>:<value>|<type>`), in order."""
        return [x.split(":", 1)[1] for x in self.lines if x.split(":", 1)[0] == name]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
