"""A fleet of supervised processes (Temporal workers, or journal `resume` processes): each slot
is started again when its process dies, as a process supervisor in production would."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from dataclasses import dataclass, field

from temporal_crashtest import Processes

RESTART_AFTER_S = 0.2  # a supervisor's pause before it starts a dead process again
SLOT = "{slot}"  # in an argument: the slot's number (the same after a restart)


@dataclass
class Slot:
    number: int
    generation: int = 0
    proc: asyncio.subprocess.Process | None = None
    log_names: list[str] = field(default_factory=list)


class Fleet:
    """`size` processes of `python ARGS` (`{slot}` in one: the slot's number). A process that
    exits with 0 is done (a `resume --until-done` that found nothing left); any other exit,
    SIGKILL included, is restarted. A process is ready (at work) once its log holds
    `ready_line`."""

    def __init__(
        self, procs: Processes, name: str, args: list[str], size: int, ready_line: str
    ) -> None:
        self.procs = procs
        self.name = name
        self.args = args
        self.ready_line = ready_line
        self.slots = [Slot(i) for i in range(1, size + 1)]
        self.stopping = False
        self.restarts = 0  # of a process that was at work (its log held `ready_line`)
        self.failed_starts = 0  # of a process that died before: e.g. its database down
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._keep_running(slot)) for slot in self.slots]

    async def _keep_running(self, slot: Slot) -> None:
        while not self.stopping:
            slot.generation += 1
            log_name = f"{self.name}-{slot.number}-{slot.generation}"
            slot.log_names.append(log_name)
            args = [a.replace(SLOT, str(slot.number)) for a in self.args]
            slot.proc = await self.procs.start(log_name, args)
            code = await self.procs.wait(slot.proc, None)
            if code == 0 or self.stopping:
                return
            if self.ready_line in self.procs.log(log_name):
                self.restarts += 1
            else:
                self.failed_starts += 1
            await asyncio.sleep(RESTART_AFTER_S)

    def live(self) -> list[Slot]:
        return [s for s in self.slots if s.proc is not None and s.proc.returncode is None]

    def ready(self) -> list[Slot]:
        """The processes at work: alive, and their log says they are ready."""
        return [s for s in self.live() if self.ready_line in self.procs.log(s.log_names[-1])]

    def kill_one(self, rng: random.Random) -> tuple[int, str] | None:
        """SIGKILL a random process that is at work; its pid and log name (None if none is:
        a process killed while it starts up holds nothing, and shows nothing)."""
        ready = self.ready()
        if not ready:
            return None
        slot = rng.choice(ready)
        assert slot.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(slot.proc.pid, signal.SIGKILL)
        return slot.proc.pid, slot.log_names[-1]

    def finished(self) -> bool:
        """Every slot's process exited with 0 (nothing left to do)."""
        return all(task.done() for task in self._tasks)

    async def stop(self) -> None:
        self.stopping = True
        await asyncio.gather(
            *(self.procs.stop(s.proc) for s in self.slots if s.proc is not None),
            return_exceptions=True,
        )
        await asyncio.gather(*self._tasks, return_exceptions=True)
