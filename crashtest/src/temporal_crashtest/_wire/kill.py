"""A kill on the wire: the worker dies as it sends an activity's completion, before the server
hears it — the moment `after-effect` names (the activity ran, its result is not recorded) — or
once the server has answered it (`after-checkpoint`: recorded, and nothing after it), whatever
language the worker is written in. The worker is a command the crash test started in a
process group of its own (`start_new_session`); the whole group is SIGKILLed, and the call that
carried the completion is dropped, never forwarded (after-effect)."""

from __future__ import annotations

import os
import signal

from temporal_crashtest._wire.tasks import TaskEnd, WireTasks


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (a worker command and whatever it started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # already gone: nothing to kill


class KillAtCompletion(WireTasks):
    """Once armed with a worker group's `pid`, kills it at the `nth` activity completion to pass
    through (1: the first): as the worker sends it, dropping the call (`recorded` False: the
    moment after-effect names), or once the server has answered it (`recorded` True: the
    server recorded the activity done, and nothing after it — after-checkpoint). Every other
    call goes through. `killed`: the completion at which the worker died (its attempt, and the
    worker's identity, by which the server's pending activities name the worker that last
    started them: `_fastforward.fast_forward` ends those at once)."""

    def __init__(self, nth: int, recorded: bool = False) -> None:
        super().__init__()
        self.nth, self.recorded = nth, recorded
        self.pid: int | None = None
        self.completions = 0
        self.killed: TaskEnd | None = None

    def arm(self, pid: int) -> None:
        self.pid = pid

    def _the_one(self, method: str, request: bytes) -> TaskEnd | None:
        """The completion to kill at, the first time this is asked of it."""
        end = self.end_of(method, request)
        if end is None or end.how != "completed" or self.killed or self.pid is None:
            return None
        self.completions += 1
        return end if self.completions == self.nth else None

    async def before(self, method: str, request: bytes) -> bool:
        if self.recorded or (end := self._the_one(method, request)) is None:
            return True
        self._kill(end)
        return False

    async def after(self, method: str, request: bytes, response: bytes) -> None:
        await super().after(method, request, response)
        if self.recorded and (end := self._the_one(method, request)) is not None:
            self._kill(end)

    def _kill(self, end: TaskEnd) -> None:
        assert self.pid is not None
        self.killed = end
        kill_group(self.pid)
