"""The labs' own servers: an embedded Postgres, a Temporal dev server and a grocer in a folder of
the lab's, so that chaos, the crash matrix's key-expiry row, the scale bench and the tests kill
and restart only processes they started, never the project's."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

from temporal_crashtest import Processes

from infra.embedded_postgres import ensure_postgres, kill_postgres, stop_postgres
from infra.errors import ConfigError, DatabaseUnavailable
from infra.processes import free_port, listening, wait_until_gone, wait_until_listening
from infra.temporal_client import connect_temporal
from infra.temporal_server import dev_server_command, temporal_binary

RESTART_TIMEOUT_S = 30
PID_FILE = "temporal.pid"
STOP_TIMEOUT_S = 10


class LabPostgres:
    """An embedded Postgres on `<folder>/pg`: killed with SIGKILL (a crash: no shutdown, the
    backends die with the postmaster) and started again on the same data."""

    def __init__(self, folder: Path) -> None:
        self.pgdata = folder / "pg"

    async def start(self) -> str:
        """Start it (after a kill: recover, as Postgres does after a crash); its URL."""
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        while True:
            try:
                return await asyncio.to_thread(ensure_postgres, self.pgdata)
            except DatabaseUnavailable:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def kill(self) -> int:
        return await asyncio.to_thread(kill_postgres, self.pgdata)

    async def stop(self) -> None:
        await asyncio.to_thread(stop_postgres, self.pgdata)


class LabTemporal:
    """A Temporal dev server on `<folder>/temporal.db` (SQLite, with the project's tuning), on a
    port of its own: killed with SIGKILL and started again on the same file. `in_memory`: no
    file, for a server nothing restarts (the test suite's: its runs need no disk, and SQLite in
    memory costs the server a quarter less CPU per crash test, measured here)."""

    def __init__(
        self,
        folder: Path,
        *,
        port: int | None = None,
        extra_flags: tuple[str, ...] = (),
        in_memory: bool = False,
    ) -> None:
        self.folder = folder
        self.port = port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.extra_flags = extra_flags
        self.db_file = None if in_memory else folder / "temporal.db"
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> str:
        """Start the server; its address once its frontend answers (a port that listens is not
        yet a server that serves: "Frontend is not healthy yet", on a loaded machine)."""
        await asyncio.to_thread(self._start)
        await connect_temporal(self.address)
        return self.address

    def _start(self) -> None:
        command = dev_server_command(
            temporal_binary(), port=self.port, ui_port=None, db_file=self.db_file
        ) + list(self.extra_flags)
        log = self.folder / "temporal.log"
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        (self.folder / PID_FILE).write_text(str(self.proc.pid))
        name = "the lab's Temporal dev server"
        wait_until_listening(self.proc, name, "127.0.0.1", self.port, log)

    async def kill(self) -> int:
        return await asyncio.to_thread(self._kill)

    def _kill(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        while listening("127.0.0.1", self.port):  # the port is free again before the restart
            time.sleep(0.05)
        return self.proc.pid

    async def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            await asyncio.to_thread(self._stop)

    def _stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        try:
            self.proc.wait(STOP_TIMEOUT_S)  # our child: wait() reaps it, a zombie is not gone
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def stop_leftovers(folder: Path) -> None:
    """Stop the servers an earlier lab run left in `folder` (it was killed before it could),
    before the folder is reused: only those the lab itself started there."""
    with contextlib.suppress(DatabaseUnavailable):
        stop_postgres(folder / "pg")
    pid_file = folder / PID_FILE
    if pid_file.exists():
        pid = int(pid_file.read_text())
        with contextlib.suppress(OSError):  # gone already (no /proc entry), or not ours to kill
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if str(folder).encode() in cmdline:  # that pid is still our server, not a reuse
                os.kill(pid, signal.SIGKILL)
                wait_until_gone([pid], STOP_TIMEOUT_S)


class LabGrocer:
    """A grocer of the lab's own (`python -m grocer`, tracked with the lab's other processes),
    whose idempotency keys live `key_ttl_s`."""

    def __init__(self, procs: Processes, key_ttl_s: float) -> None:
        self.procs = procs
        self.key_ttl_s = key_ttl_s
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_key = secrets.token_urlsafe(24)  # the lab's one account

    async def start(self) -> str:
        proc = await self.procs.start(
            f"grocer-{self.port}",
            ["-m", "grocer", "--port", str(self.port)],
            GROCER_KEY_TTL_S=str(self.key_ttl_s),
            GROCER_API_KEY=self.api_key,
        )
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        while not listening("127.0.0.1", self.port):
            if proc.returncode is not None or time.monotonic() > deadline:
                last = self.procs.last_line(f"grocer-{self.port}")
                raise ConfigError(f"the lab's grocer did not start: {last}")
            await asyncio.sleep(0.1)
        return self.url
