"""A stand-in for the HTTP services an agent's tools call (payments, mail, a model provider):
it answers every request 200 with `{}` and counts what it was sent, on a free port of
127.0.0.1, in a thread of the test's process."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class EffectsService(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.received: Counter[str] = Counter()  # "METHOD /path" -> requests
        self.lock = threading.Lock()

    @property
    def netloc(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _Answer(BaseHTTPRequestHandler):
    server: EffectsService

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        with self.server.lock:
            self.server.received[f"{self.command} {self.path.split('?')[0]}"] += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

    def log_message(self, *args: object) -> None:  # no access log on the test's stderr
        pass


@contextmanager
def effects_service() -> Iterator[EffectsService]:
    server = EffectsService()
    thread = threading.Thread(target=server.serve_forever, name="effects-service", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
