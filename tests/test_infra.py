"""The embedded Postgres: started on demand, reused, and recovered after a SIGKILL."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path

import platformdirs
import psycopg
import pytest

from infra.embedded_postgres import socket_dir
from tests.helpers import ROOT, run_python

START = ["-m", "tests.programs.start_postgres"]


def start_embedded(data: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = run_python(START, {**env, "DATA_DIR": str(data)})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def postmaster_pid(data: Path) -> int:
    return int((data / "pg" / "postmaster.pid").read_text().splitlines()[0])


@pytest.mark.servers
def test_a_killed_embedded_postgres_is_recovered(tmp_path: Path) -> None:
    data = tmp_path / "data"
    url = start_embedded(data)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("create table survives (v int)")
        conn.execute("insert into survives values (42)")

    pid = postmaster_pid(data)
    assert start_embedded(data) == url  # a second command reuses the running server
    assert postmaster_pid(data) == pid

    os.kill(pid, signal.SIGKILL)  # leaves a stale postmaster.pid behind
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    try:
        url = start_embedded(data)  # recovered: a fresh server on the same data
        assert postmaster_pid(data) != pid
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("select v from survives").fetchone() == (42,)
    finally:
        os.kill(postmaster_pid(data), signal.SIGTERM)


@pytest.mark.servers
def test_a_socket_outside_the_data_directory_is_the_servers_alone(tmp_path: Path) -> None:
    """A DATA_DIR too long for a Unix socket path: the library puts the socket in a runtime
    folder it makes 0777, and with trust authentication any local user could connect. The
    folder ends up 0700 and the server's own; a nobody cannot even list it; we still connect.
    The folder is never 0777, not even while the server starts (it was for ~0.3 s); the socket
    file itself is 0700 from the moment the server makes it, and a command that finds the folder
    left 0777 (one killed mid-start) makes it private again."""
    data = tmp_path / ("d" * 110)
    runtime = platformdirs.user_runtime_path("python_PostgresServer")  # where the library puts it
    before = set(runtime.iterdir()) if runtime.is_dir() else set()
    modes: set[int] = set()
    starting = threading.Event()

    def watch() -> None:  # every mode a new folder there has while the server starts
        while not starting.is_set():
            for folder in set(runtime.iterdir()) - before if runtime.is_dir() else ():
                with contextlib.suppress(OSError):
                    modes.add(stat.S_IMODE(folder.stat().st_mode))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        url = start_embedded(data)
    finally:
        starting.set()
        watcher.join()
    try:
        # never writable by another user (the library's mkdir makes it 0755 for a moment)
        assert modes and all(m & 0o022 == 0 for m in modes), sorted(map(oct, modes))
        where = socket_dir(data / "pg")
        assert where is not None and where != data / "pg", where  # the long-path case
        [sock] = where.glob(".s.PGSQL.*[0-9]")
        assert stat.S_IMODE(sock.stat().st_mode) == 0o700, oct(sock.stat().st_mode)
        where.chmod(0o777)  # what a start SIGKILLed before its chmod leaves
        assert start_embedded(data) == url  # the next command reuses the server...
        mode = where.stat()
        assert stat.S_IMODE(mode.st_mode) == 0o700, oct(mode.st_mode)  # ...and closes it
        assert mode.st_uid == (data / "pg").stat().st_uid
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
        runuser = shutil.which("runuser")
        if os.geteuid() == 0 and runuser and mode.st_uid != 65534:
            done = subprocess.run([runuser, "-u", "nobody", "--", "ls", str(where)],
                                  capture_output=True, text=True)  # fmt: skip
            assert done.returncode != 0 and "Permission denied" in done.stderr, done
    finally:
        os.kill(postmaster_pid(data), signal.SIGTERM)


@pytest.mark.servers
def test_stop_stops_postgres_even_after_a_sigkilled_process(tmp_path: Path) -> None:
    """The library lists every process that started the server and will not stop while one is
    listed; a SIGKILLed process never removes itself. `python -m infra stop` stops it anyway."""
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["DATA_DIR"] = str(data)
    crashed = run_python([*START, "--die"], env)  # starts the server, then is SIGKILLed
    assert crashed.returncode == -signal.SIGKILL
    pid = postmaster_pid(data)
    handles = json.loads((data / "pg" / ".handle_pids.json").read_text())
    assert handles  # the dead process is still listed: the library would not stop the server

    done = run_python(["-m", "infra", "stop"], env)
    assert done.returncode == 0, done.stderr
    assert "embedded Postgres: stopped" in done.stdout
    try:
        os.kill(pid, 0)
        raise AssertionError(f"postmaster {pid} still runs after 'stopped'")
    except ProcessLookupError:
        pass
    again = run_python(["-m", "infra", "stop"], env)
    assert "embedded Postgres: not running" in again.stdout


def test_every_dev_server_gets_the_same_tuning() -> None:
    """The project's dev server and crashtest's private one are tuned alike: the two
    distributions cannot share a module (the product does not import the tool), so the tuning,
    stated in each, is checked here to be one fact."""
    from temporal_crashtest import dev_server_command

    from infra import temporal_server

    binary, db = Path("temporal"), Path("temporal.db")
    assert temporal_server.dev_server_command(binary, db_file=db) == dev_server_command(
        binary, db_file=db
    )


def test_every_connection_error_is_told_alike() -> None:
    """The product's Temporal client and crashtest's say the same line for the same connection
    error, with the same verdict on retrying: the two tables are copies (for the reason above),
    read here as the literals they are (a test outside crashtest imports only its public face)."""

    def reasons(path: Path) -> object:
        [table] = [
            node.value
            for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_REASONS"
        ]
        return ast.literal_eval(table)

    crashtest = ROOT / "crashtest" / "src" / "temporal_crashtest" / "_connect.py"
    assert reasons(ROOT / "infra" / "temporal_client.py") == reasons(crashtest)
