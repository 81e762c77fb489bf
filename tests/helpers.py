"""Helpers for the tests: run commands as a user types them, read what a run left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg

from agent.outcome import RunState, read_run_state_sync

ROOT = Path(__file__).resolve().parent.parent


def new_run_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def child_env(db_url: str, **extra: str) -> dict[str, str]:
    """The environment for a child process: the test's database, and no inherited CRASH_AT."""
    env = {k: v for k, v in os.environ.items() if k != "CRASH_AT"}
    env["DATABASE_URL"] = db_url
    env.update(extra)
    return env


def run_python(
    args: list[str], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` from the project root, as a user types it; output captured."""
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def assert_one_line_error(
    done: subprocess.CompletedProcess[str], message: str, prefix: str = "error: "
) -> None:
    """An expected failure: exit 2 and one readable line on stderr, no stack trace."""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert_ends_in_error(done, message, prefix)


def assert_ends_in_error(
    done: subprocess.CompletedProcess[str], message: str, prefix: str = "error: "
) -> None:
    """An expected failure found after some progress was shown: exit 2, the error on the last
    line, no stack trace."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(prefix) and message in last, done.stderr


def run_journal(
    db_url: str, run_id: str, design: str, crash_at: str | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    """Run `python -m journal run` exactly as a user or the crash lab does."""
    env = child_env(db_url, **extra)
    if crash_at:
        env["CRASH_AT"] = crash_at
    return run_python(["-m", "journal", "run", "--run-id", run_id, "--design", design], env)


def state(db: psycopg.Connection, run_id: str) -> RunState:
    return read_run_state_sync(db, run_id)


class WorkerProcess:
    """`python worker.py` in a child process, as a user runs it; its output goes to a log file."""

    def __init__(self, db_url: str, address: str, queue: str, log_dir: Path, **env: str) -> None:
        self.log_path = log_dir / f"worker-{uuid.uuid4().hex[:6]}.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "worker.py"],
            cwd=ROOT,
            env=child_env(db_url, TEMPORAL_ADDRESS=address, TASK_QUEUE=queue, **env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> int:
        """SIGTERM, as a supervisor stops a worker; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode
