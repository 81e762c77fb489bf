"""What a worker process tells the crash test, as JSON lines on a channel of its own.

The crash test makes a FIFO per worker (`<log_dir>/<name>.status`) and passes its path
(`--status PATH`); the worker writes one JSON object a line to it: `{"event": "warm"}` once
built, `{"event": "ready", "identity": ..., "sticky_s": ...}` once it polls, `{"event":
"started", "workflow_id": ..., "activity_id": ..., "attempt": ...}` as it receives each activity
attempt, `{"event": "overran", "workflow_id": ..., "activity_id": ..., "activity_type": ...,
"attempt": ..., "by": ...}` as it receives attempt `by` while `attempt` of the same activity still
runs on it (a timeout ended that one on a live worker), `{"event": "task_failed", "run_id": ...,
"message": ..., "at": ...}` as a workflow task fails on it (see `_task_failures`), `{"event":
"effect", "root": ..., "scope": ..., "position": ..., "attempt": ..., "what": ...}` as an
activity says it made an effect (`_effects`), `{"event": "unseen", ...}` (the same facts) as it
makes one no crash point can follow (`_effects.unseen`), `{"event": "completes_later", "root": ...,
"scope": ..., "position": ..., "attempt": ..., "seen": ...}` as an activity hands its attempt to
be completed later by a client (`seen` false), and as the worker's client completes it (`seen`
true), and `{"event": "crash", "in_flight": [...],
"attempts": [...]}` just before it SIGKILLs itself. One writer a FIFO, its writes one at a time (a
log record may come from a thread of the SDK's), so lines never interleave, whatever their
length.
The worker's log keeps the same facts in words, for a person; the crash test reads only this
channel (`WorkerStatus`), as it comes, with no polling of files.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Protocol


class Status(Protocol):
    """What the crash test reads of a worker's state: from its status channel
    (`WorkerStatus`), or off the wire for a worker of any SDK (`_wire.status.WireStatus`)."""

    warm: asyncio.Event
    ready: asyncio.Event
    facts: dict[str, Any]
    crash: dict[str, Any] | None
    started: set[tuple[str, str, int]]
    overran: list[dict[str, Any]]
    effects: list[dict[str, Any]]
    unseen: list[dict[str, Any]]
    completions: list[dict[str, Any]]
    task_failures: dict[str, tuple[float, str]]

    def drain(self) -> None: ...

    def close(self) -> None: ...


class StatusWriter:
    """The worker's end: writes an event a line (nothing at all without a channel)."""

    def __init__(self, path: str | None) -> None:
        self._fd = os.open(path, os.O_WRONLY) if path else None
        self._one_at_a_time = threading.Lock()

    def send(self, event: str, **facts: Any) -> None:
        if self._fd is None:
            return
        data = (json.dumps({"event": event, **facts}) + "\n").encode()
        with self._one_at_a_time:
            while data:
                data = data[os.write(self._fd, data) :]


class WorkerStatus:
    """The crash test's end: the events of one worker, taken as they arrive (the event loop
    reads the FIFO when it has data) or at once (`drain`, after the worker died: whatever it
    wrote before is in the FIFO already)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd
        self._buffer = b""
        self.warm = asyncio.Event()
        self.ready = asyncio.Event()
        self.facts: dict[str, Any] = {}  # from "ready": the worker's identity, sticky timeout
        self.crash: dict[str, Any] | None = None  # from "crash": in flight, attempts held
        self.started: set[tuple[str, str, int]] = set()  # (workflow id, activity id, attempt)
        self.overran: list[dict[str, Any]] = []  # each "overran" event, in order
        self.effects: list[dict[str, Any]] = []  # each "effect" event, in order
        self.unseen: list[dict[str, Any]] = []  # each "unseen" event, in order
        self.completions: list[dict[str, Any]] = []  # each "completes_later" event, in order
        # run id -> its latest failed workflow task: when (the worker's clock), and why
        self.task_failures: dict[str, tuple[float, str]] = {}

    @classmethod
    def listen(cls, path: Path) -> WorkerStatus:
        """Make the FIFO at `path` and take its events from now on (until `close`)."""
        os.mkfifo(path, 0o600)
        # Read and write: the FIFO has a writer (this end) before the worker opens it, so that
        # reading it never sees an end of file, and the worker's open never blocks.
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        status = cls(path, fd)
        asyncio.get_running_loop().add_reader(fd, status.drain)
        return status

    def drain(self) -> None:
        """Take every event written so far."""
        while self._fd is not None:
            try:
                chunk = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self._take(line)

    def _take(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        event = message.pop("event", None)
        if event == "warm":
            self.warm.set()
        elif event == "ready":
            self.facts = message
            self.ready.set()
        elif event == "crash":
            self.crash = message
        elif event == "started":
            where = (message.get("workflow_id"), message.get("activity_id"), message.get("attempt"))
            self.started.add((str(where[0]), str(where[1]), int(where[2] or 0)))
        elif event == "effect":
            self.effects.append(message)
        elif event == "unseen":
            self.unseen.append(message)
        elif event == "completes_later":
            self.completions.append(message)
        elif event == "overran":
            self.overran.append(message)
        elif event == "task_failed":
            at = float(message.get("at") or 0.0)
            self.task_failures[str(message.get("run_id"))] = (at, str(message.get("message", "")))

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(ValueError, RuntimeError):  # the loop may be closed
                asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None
        self.path.unlink(missing_ok=True)
