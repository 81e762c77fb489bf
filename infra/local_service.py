"""A local service this project starts on first use and leaves running for the next command:
detached (it outlives the command and its Ctrl-C), its pid in `.data/NAME.pid`, its log in
`.data/NAME.log`; two commands started at once start it once. `make stop` stops it."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess

from infra.config import data_dir
from infra.processes import listening, wait_until_gone, wait_until_listening

STOP_TIMEOUT_S = 10


def ensure_running(
    name: str, command: list[str], host: str, port: int, env: dict[str, str] | None = None
) -> None:
    """Start `command` (which listens on host:port, with `env` added to this process's
    environment) unless something listens there already."""
    if listening(host, port):
        return
    folder = data_dir()
    with (folder / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second command waits for the first one's start
        if listening(host, port):
            return
        log_path = folder / f"{name}.log"
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                start_new_session=True,  # outlives this command, is not killed by its Ctrl-C
            )
        (folder / f"{name}.pid").write_text(str(proc.pid))
        wait_until_listening(proc, name, host, port, log_path)


def stop(name: str) -> bool:
    """Stop the service this project started (by its pid file). True if one was stopped."""
    pid_file = data_dir() / f"{name}.pid"
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
