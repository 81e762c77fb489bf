"""The grocer used when GROCER_URL is unset: `python -m grocer` on 127.0.0.1:8300, started on
first use and left running (`.data/grocer.pid`, `.data/grocer.log`) like the other local
services. It takes GROCER_KEY_TTL_S as it is when it starts."""

from __future__ import annotations

import sys

from infra.config import env_str
from infra.local_service import ensure_running, stop

HOST = "127.0.0.1"
PORT = 8300
NAME = "grocer"


def grocer_url() -> str:
    """GROCER_URL if set, else the local grocer (started if it is not running)."""
    url = env_str("GROCER_URL")
    if url:
        return url.rstrip("/")
    command = [sys.executable, "-m", "grocer", "--host", HOST, "--port", str(PORT)]
    ensure_running(NAME, command, HOST, PORT)
    return f"http://{HOST}:{PORT}"


def stop_grocer() -> bool:
    return stop(NAME)
