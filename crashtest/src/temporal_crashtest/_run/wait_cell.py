"""A wait cell: the run starts without time skipping (or, with timers on its way, skipping until
just short of where the run without a crash started the timer: `TimerWait.skip_until`) and goes
on until it waits on the timer before its boundary, nothing in flight; crashtest SIGKILLs the
worker there, starts the next one (in a deploy test, of the version deployed: the run that fell
asleep on the old code wakes on the new), and turns time skipping on, so that the timer fires at
once; the next worker takes the run when it does. Without time skipping the timer takes its real
time."""

from __future__ import annotations

import asyncio
import time

from temporalio.api.enums.v1 import EventType

from temporal_crashtest._errors import CellFailed
from temporal_crashtest._history.load import activity_timeouts
from temporal_crashtest._history.timers import ACTIVITY_CLOSED, TimerWait
from temporal_crashtest._history.tree import RunHistory, read_tree
from temporal_crashtest._history.waits import Wait
from temporal_crashtest._plan.reference import CellPoint
from temporal_crashtest._run.cell import Outcome
from temporal_crashtest._run.recovery.kills import Recovery
from temporal_crashtest._run.recovery.waiting import until_one_ends
from temporal_crashtest._run.session import Session, Started
from temporal_crashtest._run.virtual_time import skip_from_now
from temporal_crashtest._run.workers import Worker
from temporal_crashtest._text import span_text

LOOK_EVERY_S = 0.05  # how often the run's history is read while it is on its way to the wait


class _NeverWaited(Exception):
    """The run did not come to the wait (why)."""


async def wait_run(session: Session, point: CellPoint, workflow_id: str) -> Outcome:
    """Run until the run waits on the point's timer; kill the worker; the next worker takes the
    run when the timer fires (or why that could not be done: `Outcome.failed`)."""
    assert point.wait is not None
    deadline = time.monotonic() + session.deadline_s
    queue = workflow_id
    first = await session.workers.start(f"{queue}-0", queue)
    workers = [first]
    run: Started | None = None
    try:
        run = await session.start(workflow_id, queue, skip=False)
        if session.horizon is not None and point.wait.skip_until is not None:
            await skip_from_now(session.client, run.handle, point.wait.skip_until)
        try:
            await _until_waiting(session, run, first, point, deadline)
        except _NeverWaited as err:
            return Outcome(workflow_id=workflow_id, handle=run.handle, not_reached=str(err))
        await session.workers.kill(first)
        killed_at = time.monotonic()
        identity = str(first.status.facts.get("identity") or "")
        await asyncio.sleep(session.resume_after_s)
        deployed = session.target.deploy is not None
        after = await session.workers.start(f"{queue}-1", queue, deployed=deployed)
        workers.append(after)
        skipped = session.horizon is not None
        if session.horizon is not None:
            await skip_from_now(session.client, run.handle, session.horizon)
        await until_one_ends(session, run, after, deadline, frozenset({identity}))
        if not run.result.done():
            raise CellFailed(
                "the worker exited before the run ended: " + session.workers.last_line(after)
            )
        recovery_s = time.monotonic() - killed_at
        tree = read_tree(await session.histories(run.handle), frozenset({queue}))
        return Outcome(
            workflow_id=workflow_id,
            handle=run.handle,
            end=run.ending(),
            tree=tree,
            recovery_s=recovery_s,
            # The kill held no attempt: one a timeout ended is a live worker's, late (load).
            recovery=Recovery(
                waited_on=_waited_on(point.wait, first, skipped),
                unexplained=activity_timeouts(tree.runs),
            ),
        )
    except CellFailed as err:
        return Outcome(workflow_id=workflow_id, handle=run.handle if run else None, failed=str(err))
    finally:
        if run is not None:
            await run.give_up()
        await session.workers.stop(workers)


async def _until_waiting(
    session: Session, run: Started, worker: Worker, point: CellPoint, deadline: float
) -> None:
    """Until the boundary's run (of the root's chain) has started the timer, which has not
    fired, and no activity of it is in flight."""
    assert point.wait is not None
    wait, scope = point.wait, point.boundary.scope
    exited = asyncio.ensure_future(worker.child.wait())
    try:
        while True:
            if exited.done():
                raise CellFailed(
                    "the worker exited before the run waited: " + session.workers.last_line(worker)
                )
            found = next((r for r in await session.histories(run.handle) if r.scope == scope), None)
            if found is not None and (why := _waiting(found, wait)) is not None:
                if why == "":
                    return
                raise _NeverWaited(why)
            if run.result.done():
                raise _NeverWaited(f"the run ended before its timer {wait.timer_id} started")
            if time.monotonic() > deadline:
                raise CellFailed(
                    f"the run did not wait on its timer {wait.timer_id} within "
                    f"{session.deadline_s:g} s (--deadline-s)"
                )
            await asyncio.sleep(LOOK_EVERY_S)
    finally:
        exited.cancel()


def _waiting(run: RunHistory, wait: TimerWait) -> str | None:
    """ "" if the run waits on the timer with nothing in flight; why it never will, if the timer
    fired first (a short timer, read too late); None: not yet."""
    in_flight, started = 0, False
    for e in run.history.events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            in_flight += 1
        elif e.event_type in ACTIVITY_CLOSED:
            in_flight -= 1
        elif e.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
            started = started or e.timer_started_event_attributes.timer_id == wait.timer_id
        elif e.event_type == EventType.EVENT_TYPE_TIMER_FIRED:
            if e.timer_fired_event_attributes.timer_id == wait.timer_id:
                return f"its timer {wait.timer_id} fired before crashtest could kill the worker"
    return "" if started and in_flight == 0 else None


def _waited_on(wait: TimerWait, killed: Worker, skipped: bool) -> tuple[str, ...]:
    """What the recovery waited on in production: the timer, then the dead worker's sticky
    queue (the task the timer schedules goes there first)."""
    timer = f"the timer of {span_text(wait.span)}" + (" (time skipping)" if skipped else "")
    sticky_s = killed.status.facts.get("sticky_s")
    return (timer, str(Wait("", "sticky queue", sticky_s))) if sticky_s else (timer,)
