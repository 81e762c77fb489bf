"""Waiting for a run to end or its worker to exit (`until_one_ends`), looking at the run every
few seconds meanwhile: a run that cannot go on (a workflow task that keeps failing, an activity
failing on every attempt, nobody polling) or that sits idle ends the wait within seconds; past
the deadline, the cell says what the run is waiting on."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

from temporal_crashtest._errors import CellFailed
from temporal_crashtest._history.load import ActivityOf
from temporal_crashtest._run.recovery.kills import Lost, end_lost_attempts
from temporal_crashtest._run.recovery.polling import (
    Going,
    Idle,
    Stuck,
    progress_of,
    what_it_waits_on,
)
from temporal_crashtest._run.session import Session, Started
from temporal_crashtest._run.virtual_time import clock_ahead
from temporal_crashtest._run.workers import Worker

WORKFLOW_TASK_CHECK_S = 2.0  # how often a waiting cell asks whether its run is stuck or idle
IDLE_CHECKS = 2  # a run seen idle this many checks in a row is reported
# Past its deadline, a run whose history still grows (a loaded machine) is given this much more,
# at most OVERRUN_FACTOR deadlines in all.
PROGRESS_GRACE_S = 10.0
OVERRUN_FACTOR = 3


@dataclass(frozen=True)
class Waited:
    """What one wait learnt: the task queues the worker polled, and the attempts it ended at
    once, lost with a dead worker (`end_lost_attempts`): in words, and whose."""

    served: frozenset[str]
    fast_forward: tuple[str, ...]
    ended: tuple[ActivityOf, ...] = ()


@dataclass(kw_only=True)
class _Watch:
    """What the wait knows of a run between its looks at it."""

    deadline: float
    latest: float  # the deadline moves on while the run progresses, never past this
    ready_at: float | None = None  # when the worker said it polls
    events: int | None = None  # the history's length when first seen, then as it grows
    progressed_at: float = -math.inf
    idle_checks: int = 0
    lost: list[Lost] = field(default_factory=list)  # lost attempts ended at once

    def time_left(self) -> float:
        """Seconds to the deadline; one a run still progressing has passed moves on a little."""
        now = time.monotonic()
        if self.deadline <= now and now - self.progressed_at < PROGRESS_GRACE_S:
            # Still going, only slowly (a loaded machine): a little longer, within bounds.
            self.deadline = min(self.latest, now + PROGRESS_GRACE_S)
        return self.deadline - now


async def until_one_ends(
    session: Session, run: Started, worker: Worker, deadline: float, killed: frozenset[str]
) -> Waited:
    """Wait until the run ends or the worker exits (`killed`: the identities of the run's dead
    workers)."""
    exited = asyncio.ensure_future(worker.child.wait())
    latest = deadline + (OVERRUN_FACTOR - 1) * session.deadline_s
    watch = _Watch(deadline=deadline, latest=latest)
    try:
        while not (run.result.done() or exited.done()):
            left = watch.time_left()
            if left <= 0:
                raise await _past_the_deadline(session, run, worker, killed)
            await asyncio.wait(
                {run.result, exited},
                timeout=min(WORKFLOW_TASK_CHECK_S, left),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not (run.result.done() or exited.done()):
                await _look(session, run, worker, watch, killed)
    finally:
        exited.cancel()
        worker.status.drain()
    return Waited(
        frozenset(worker.status.facts.get("task_queues", [])),
        tuple(said for lost in watch.lost for said in lost.said),
        tuple(ended for lost in watch.lost for ended in lost.ended),
    )


async def _past_the_deadline(
    session: Session, run: Started, worker: Worker, killed: frozenset[str]
) -> CellFailed:
    """Why a run has not ended in time: a worker that never polled, or what the run waits
    on."""
    if not worker.status.ready.is_set():
        question = (
            "does the worker command connect to TEMPORAL_ADDRESS (crashtest's proxy) and poll "
            "TEMPORAL_TASK_QUEUE, from its environment?"
            if worker.proxy is not None
            else "is the factory (--worker) still building it?"
        )
        return CellFailed(
            f"the worker did not start polling within {session.deadline_s:g} s: {question} "
            f"Its last line: {session.workers.last_line(worker)}"
        )
    waits = await what_it_waits_on(run.handle, killed)
    failed = [why for _, why in worker.status.task_failures.values()]
    told = f"; the worker's last workflow task failure: {failed[-1]}" if failed else ""
    ahead = await clock_ahead(run.handle) if session.starter is not None else ""
    return CellFailed(f"no result within {session.deadline_s:g} s; {waits}{ahead}{told}")


async def _look(
    session: Session, run: Started, worker: Worker, watch: _Watch, killed: frozenset[str]
) -> None:
    """One look at a run still going: the cell fails if the drive function raised, if the run
    cannot go on, or if it sat idle for IDLE_CHECKS looks; attempts lost with a dead worker are
    ended (unless `real_timeouts`)."""
    if run.drive is not None and run.drive.done() and not run.drive.cancelled():
        error = run.drive.exception()
        if error is not None:
            raise CellFailed(f"drive raised {type(error).__name__}: {error}")
    if watch.ready_at is None and worker.status.ready.is_set():
        watch.ready_at = time.monotonic()
    ready_for_s = None if watch.ready_at is None else time.monotonic() - watch.ready_at
    facts = worker.status.facts
    progress = await progress_of(
        session.client,
        run.handle,
        ready_for_s,
        worker.status.task_failures,
        facts.get("build_id"),
        frozenset(facts.get("task_queues", [])),
    )
    if isinstance(progress, Stuck):
        raise CellFailed(progress.why)
    if isinstance(progress, Going):
        if watch.events is not None and progress.events > watch.events:
            watch.progressed_at = time.monotonic()
        watch.events = progress.events
        if not session.real_timeouts:
            watch.lost.append(await end_lost_attempts(session.client, progress, worker, killed))
    driving = run.drive is not None and not run.drive.done()
    idle = isinstance(progress, Idle) and not driving and watch.ready_at is not None
    watch.idle_checks = watch.idle_checks + 1 if idle else 0
    if watch.idle_checks >= IDLE_CHECKS:
        hint = (
            "pass --drive"
            if session.drive is None
            else "the drive function returned without sending it"
        )
        raise CellFailed(
            f"the run is idle, waiting for something nobody sends (a signal or an update?): {hint}"
        )
