"""A kill on the wire: the worker dies as it sends an activity's completion, before the server
hears it — the moment `after-effect` names (the activity ran, its result is not recorded) —
whatever language the worker is written in. The worker is a command the crash test started in a
process group of its own (`start_new_session`); the whole group is SIGKILLed, and the call that
carried the completion is dropped, never forwarded."""

from __future__ import annotations

import os
import signal

from temporal_crashtest._wire.tasks import ActivityTasks, TaskEnd


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (a worker command and whatever it started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # already gone: nothing to kill


class KillAtCompletion(ActivityTasks):
    """Once armed with a worker group's `pid`, kills it when it sends the `nth` activity
    completion to pass through (1: the first), and drops that call; every other call goes
    through. `killed`: the completion that died with the worker (its attempt, and the worker's
    identity, by which the server's pending activities name the worker that last started them:
    `_fastforward.fast_forward` ends those at once)."""

    def __init__(self, nth: int) -> None:
        super().__init__()
        self.nth = nth
        self.pid: int | None = None
        self.completions = 0
        self.killed: TaskEnd | None = None

    def arm(self, pid: int) -> None:
        self.pid = pid

    async def before(self, method: str, request: bytes) -> bool:
        end = self.end_of(method, request)
        if end is None or end.how != "completed" or self.killed or self.pid is None:
            return True
        self.completions += 1
        if self.completions < self.nth:
            return True
        self.killed = end
        kill_group(self.pid)
        return False
