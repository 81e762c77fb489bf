"""Waiting on local processes and ports: a service's port answering, a process gone."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from infra.errors import ConfigError

START_TIMEOUT_S = 60


def listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_listening(
    proc: subprocess.Popen[bytes], name: str, host: str, port: int, log: Path
) -> None:
    """Until `proc` (the service `name`) listens on host:port; ConfigError if it exits first or
    does not start within START_TIMEOUT_S."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not listening(host, port):
        if proc.poll() is not None:
            raise ConfigError(f"{name} exited at start (code {proc.returncode}); see {log}")
        if time.monotonic() > deadline:
            raise ConfigError(f"{name} did not start in {START_TIMEOUT_S} s; see {log}")
        time.sleep(0.1)


def wait_until_gone(pids: list[int], timeout_s: float) -> bool:
    """Whether every one of `pids` has exited within `timeout_s`: for processes that are not our
    children (a child of ours lingers as a zombie until we wait() for it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            except PermissionError:  # alive, and someone else's
                pass
            alive.append(pid)
        if not alive:
            return True
        if time.monotonic() > deadline:
            return False
        pids = alive
        time.sleep(0.05)
