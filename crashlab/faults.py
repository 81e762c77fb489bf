"""The chaos lab's fault injector: seeded, bounded in count and in time, and it touches only the
processes the lab started (its fleet, its Postgres, its Temporal server), by pid."""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from crashlab.fleet import Fleet
from crashlab.servers import LabPostgres, LabTemporal

log = logging.getLogger(__name__)

FIRST_FAULT_AFTER_S = 1.0  # after the first process of the fleet is at work
MIN_GAP_S = 0.2  # the shortest pause between two faults
SPREAD = 0.5  # the faults left fall within this share of the runs' estimated time left
FIRST_GAP_S = 0.5  # until the runs' pace is known (the first of them has made a step)
WAIT_FOR_A_VICTIM_S = 0.2
DOWNTIME_S = (1.0, 2.5)  # a killed server stays down this long before it is started again


class ChaosFault(StrEnum):
    WORKER_KILL = "worker_kill"
    POSTGRES_RESTART = "postgres_restart"
    TEMPORAL_RESTART = "temporal_restart"


@dataclass(kw_only=True, frozen=True)
class Injected:
    fault: ChaosFault
    at: float  # wall clock (time.time()), comparable with the servers' timestamps
    pid: int  # the process killed
    log_name: str = ""  # for a worker: its log, which says what it held
    down_s: float = 0.0  # for a server: how long it was gone


def next_gap(seconds_left: float | None, faults_left: int, rng: random.Random) -> float:
    """The pause before the next fault: the first `SPREAD` of what is left of the runs'
    estimated time shared among the faults left and the end, jittered (an estimate that runs
    long would otherwise leave faults unspent when the runs end); `FIRST_GAP_S` while nothing is
    done yet."""
    mean = FIRST_GAP_S if seconds_left is None else SPREAD * seconds_left / (faults_left + 1)
    return max(mean * rng.uniform(0.5, 1.5), MIN_GAP_S)


@dataclass(kw_only=True)
class FaultInjector:
    rng: random.Random
    budget: dict[ChaosFault, int]
    fleet: Fleet
    postgres: LabPostgres | None
    temporal: LabTemporal | None
    injected: list[Injected] = field(default_factory=list)

    def count(self, fault: ChaosFault) -> int:
        return sum(1 for i in self.injected if i.fault is fault)

    async def run(
        self, keep_going: Callable[[], bool], seconds_left: Callable[[], float | None]
    ) -> None:
        """Inject every fault of the budget, in a seeded order, while `keep_going()` (the runs
        are not all finished). The pauses between faults spread what is left of the budget over
        `seconds_left()`, the runs' estimated time to finish (from the work done so far, not the
        runs finished: with many runs none finishes for a long while), jittered by the seeded
        generator, so the faults fall across the runs' whole lifetime, however fast the engine
        is and however many runs there are."""
        faults = [fault for fault, n in self.budget.items() for _ in range(n)]
        self.rng.shuffle(faults)
        while not self.fleet.ready():  # faults mean something once the fleet is at work
            if not keep_going():
                return
            await asyncio.sleep(WAIT_FOR_A_VICTIM_S)
        await asyncio.sleep(FIRST_FAULT_AFTER_S)
        for i, fault in enumerate(faults):
            if not keep_going():
                return
            await self.inject(fault, keep_going)
            faults_left = len(faults) - i - 1
            gap = next_gap(seconds_left(), faults_left, self.rng)
            for tick in range(math.ceil(gap / WAIT_FOR_A_VICTIM_S)):
                # The runs may end meanwhile, or their pace turn out quicker than estimated.
                left = seconds_left()
                waited = tick * WAIT_FOR_A_VICTIM_S
                if not keep_going():
                    return
                if left is not None and waited >= SPREAD * left / (faults_left + 1):
                    break
                await asyncio.sleep(WAIT_FOR_A_VICTIM_S)

    async def inject(self, fault: ChaosFault, keep_going: Callable[[], bool]) -> None:
        if fault is ChaosFault.WORKER_KILL:
            killed = self.fleet.kill_one(self.rng)
            while killed is None:  # no process is at work yet (all starting up)
                if not keep_going():
                    return
                await asyncio.sleep(WAIT_FOR_A_VICTIM_S)
                killed = self.fleet.kill_one(self.rng)
            self.injected.append(
                Injected(fault=fault, at=time.time(), pid=killed[0], log_name=killed[1])
            )
            log.info("chaos: SIGKILL %s (pid %d)", killed[1], killed[0])
            return
        at = time.time()
        server = self.postgres if fault is ChaosFault.POSTGRES_RESTART else self.temporal
        assert server is not None
        started = time.monotonic()
        pid = await server.kill()
        await asyncio.sleep(self.rng.uniform(*DOWNTIME_S))  # a server takes a moment to come back
        await server.start()
        down = time.monotonic() - started
        self.injected.append(Injected(fault=fault, at=at, pid=pid, down_s=down))
        log.info("chaos: %s (pid %d SIGKILLed, back after %.1f s)", fault, pid, down)
