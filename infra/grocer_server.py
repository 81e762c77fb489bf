"""The grocer used when GROCER_URL is unset: `python -m grocer` on 127.0.0.1:8300, started on
first use and left running (`.data/grocer.pid`, `.data/grocer.log`) like the other local
services. It takes GROCER_KEY_TTL_S as it is when it starts, and its account's key from
GROCER_API_KEY, else from `.data/grocer-api-key` (made once, readable by its owner only)."""

from __future__ import annotations

import os
import secrets
import sys

from infra.config import PLACEHOLDER, data_dir, env_str, http_url
from infra.errors import ConfigError
from infra.local_service import ensure_running, stop
from infra.redaction import redact

HOST = "127.0.0.1"
PORT = 8300
NAME = "grocer"


def ensure_grocer_url() -> str:
    """GROCER_URL if set, else the local grocer (started if it is not running)."""
    url = env_str("GROCER_URL")
    if url:
        # The account's key goes in GROCER_API_KEY, as a Bearer token: no userinfo beside it.
        http_url("GROCER_URL", url, repr(redact(url)), credentials=False)
        return url.rstrip("/")
    command = [sys.executable, "-m", "grocer", "--host", HOST, "--port", str(PORT)]
    ensure_running(NAME, command, HOST, PORT, {"GROCER_API_KEY": grocer_api_key()})
    return f"http://{HOST}:{PORT}"


def grocer_api_key() -> str:
    """GROCER_API_KEY; unset, the local grocer's key (only when GROCER_URL is unset too)."""
    key = env_str("GROCER_API_KEY")
    if key and key.startswith(PLACEHOLDER):
        raise ConfigError("GROCER_API_KEY is .env.example's placeholder: set the account's key")
    if key:
        return key
    if env_str("GROCER_URL"):
        raise ConfigError(
            "GROCER_URL is set but GROCER_API_KEY is not: set the grocer account's secret key"
        )
    path = data_dir() / "grocer-api-key"
    if not path.exists():  # made whole, then linked in place: a racing command reads it whole
        draft = path.with_name(f"{path.name}.{os.getpid()}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(32))
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # another command made it first
        finally:
            draft.unlink()
    return path.read_text().strip()


def stop_grocer() -> bool:
    return stop(NAME)
