"""A kill on the wire: the worker dies as it sends an activity's completion, which the server
never hears — the moment `after-effect` names (the activity ran, its result is not recorded) —
or hears alone, from the proxy, once the dead worker's polls are gone (`after-checkpoint`:
recorded, and nothing after it), whatever language the worker is written in. The worker is a
command the crash test started in a process group of its own (`start_new_session`); the whole
group is SIGKILLed."""

from __future__ import annotations

import os
import signal

from temporal_crashtest._wire.forward import Pass
from temporal_crashtest._wire.tasks import TaskEnd, WireTasks


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (a worker command and whatever it started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # already gone: nothing to kill


class KillAtCompletion(WireTasks):
    """Once armed with a worker group's `pid`, kills it at the `nth` activity completion to pass
    through (1: the first), as the worker sends it. The call is dropped (`recorded` False: the
    activity ran, the server never hears it — after-effect), or forwarded alone once the dead
    worker's polls have ended (`recorded` True: the server records the activity done and
    nothing after it, and hands the run's next workflow task to no one — after-checkpoint).
    Every other call goes through. `killed`: the completion at which the worker died (its
    attempt, and the worker's identity, by which the server's pending activities name the
    worker that last started them: `_fastforward.fast_forward` ends those at once)."""

    def __init__(self, nth: int, recorded: bool = False) -> None:
        super().__init__()
        self.nth, self.recorded = nth, recorded
        self.pid: int | None = None
        self.completions = 0
        self.killed: TaskEnd | None = None

    def arm(self, pid: int) -> None:
        self.pid = pid

    async def before(self, method: str, request: bytes) -> Pass:
        end = self.end_of(method, request)
        if end is None or end.how != "completed" or self.killed or self.pid is None:
            return Pass.GO
        self.completions += 1
        if self.completions < self.nth:
            return Pass.GO
        self.killed = end
        kill_group(self.pid)
        return Pass.ALONE if self.recorded else Pass.DROP
