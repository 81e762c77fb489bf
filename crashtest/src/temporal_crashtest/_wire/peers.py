"""Who may use a worker's proxy: only the worker it was started for.

A proxy listens on 127.0.0.1, where any process of the machine can connect, and it puts the
operator's credentials (an API key, a client certificate) on every call it forwards: serving
anyone, it would lend them to any local process for the test's length. So each connection's
process is found (Linux: the connection's socket in `/proc/net/tcp`, then the process holding
that socket among `/proc/*/fd`) and served only if it is the worker's: the process started for it
(`admit`), one it started (its descendants), or one that carries the worker's token in its
environment (`_processes.TOKEN_ENV`, which every process the worker command starts inherits, even
one that left its process group). Anything else is refused (PERMISSION_DENIED), in one line.
Standard library only; where `/proc` is missing nothing can be found (`can_tell` is False).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from pathlib import Path

from temporal_crashtest._process_groups import carriers, descendants

ADMIT_WAIT_S = 2.0  # how long an unknown peer waits for its worker to be admitted (a fork's pid)
_PROC = Path("/proc")


def new_token() -> str:
    return secrets.token_hex(16)


def can_tell() -> bool:
    """Whether this system says which process holds a connection (Linux's /proc)."""
    return (_PROC / "net" / "tcp").exists()


class Peers:
    """The processes one proxy serves: those `admit`ted, their descendants, and those carrying
    `token`; each connection (its peer, `ipv4:127.0.0.1:PORT`) decided once."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.pids: set[int] = set()
        self.port = 0  # the proxy's own, once it listens
        self._decided: dict[str, bool] = {}
        self._admitted = asyncio.Event()

    def admit(self, pid: int) -> None:
        self.pids.add(pid)
        self._admitted.set()

    async def allows(self, peer: str) -> bool:
        """Whether the process at the other end of `peer` is the worker's (an unknown one waits
        up to ADMIT_WAIT_S for its worker's pid: a forked worker may call before it is told)."""
        if (known := self._decided.get(peer)) is not None:
            return known
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ADMIT_WAIT_S
        while True:
            holder = await asyncio.to_thread(self._holder, peer)
            if holder is not None or loop.time() >= deadline:
                break
            self._admitted.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._admitted.wait(), deadline - loop.time())
        self._decided[peer] = holder is not None
        return holder is not None

    def _holder(self, peer: str) -> int | None:
        """The worker's process that holds the connection from `peer` (None: none of them)."""
        port = _port_of(peer)
        inode = _inode(port, self.port) if port else None
        if inode is None:
            return None
        family = set(self.pids)
        for pid in list(family):
            family |= descendants(pid)
        found = next((pid for pid in family if _holds(pid, inode)), None)
        if found is not None:
            return found
        # One that left the worker's tree (a daemon): found by its token, every process read.
        return next((pid for pid in carriers(self.token) if _holds(pid, inode)), None)


def _port_of(peer: str) -> int | None:
    """The port of a gRPC peer `ipv4:127.0.0.1:PORT` (None: not a local TCP peer)."""
    if not peer.startswith("ipv4:127."):
        return None
    port = peer.rpartition(":")[2]
    return int(port) if port.isdigit() else None


def _inode(local_port: int, remote_port: int) -> int | None:
    """The inode of the socket connected from 127.0.0.1:`local_port` to `remote_port`."""
    try:
        lines = (_PROC / "net" / "tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 10:
            continue
        local, remote = fields[1].rpartition(":")[2], fields[2].rpartition(":")[2]
        if int(local, 16) == local_port and int(remote, 16) == remote_port:
            return int(fields[9])
    return None


def _holds(pid: int, inode: int) -> bool:
    """Whether process `pid` has the socket `inode` open."""
    wanted = f"socket:[{inode}]"
    try:
        fds = list((_PROC / str(pid) / "fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(fd) == wanted:
                return True
    return False
