"""A cell's run: a run crashed at each of its stages in turn, taken over by a fresh worker after
each kill, to its end (`crashed_run`), run again while a loaded machine leaves its marks
(`through_load`); what it came to is an `Outcome`, a value.

Each worker that takes over is started warm beforehand and told to poll at the kill; unless
`real_timeouts`, each recovery is fast-forwarded (`_recovery`, `_fastforward`)."""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowHandle

from temporal_crashtest._errors import CellFailed, NotReached
from temporal_crashtest._history.load import ActivityOf
from temporal_crashtest._history.tree import read_tree
from temporal_crashtest._plan.reference import CellPoint, Reference
from temporal_crashtest._run.recovery.fastforward import SHORT_TASK_TIMEOUT
from temporal_crashtest._run.recovery.kills import (
    Kill,
    Recovery,
    after_the_kill,
    read_waits,
    task_timeout,
)
from temporal_crashtest._run.recovery.waiting import until_one_ends
from temporal_crashtest._run.session import Session, Started
from temporal_crashtest._run.workers import Worker
from temporal_crashtest._worker.task_failures import DEADLOCK, with_likely_cause

GROUP_KILL_ALLOWANCE_S = 5.0  # each kill after a group's first adds this much to its deadline
LOADED_RERUNS = 3  # a cell whose run saw load's doing (`Outcome.unexplained`) is run this often


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a run came to: how it ended (`_session.ending`), its kills, its recovery."""

    workflow_id: str
    handle: WorkflowHandle[Any, Any] | None = None
    end: str = ""
    served: frozenset[str] = frozenset()  # the task queues its workers polled
    kills: tuple[Kill, ...] = ()
    recovery_s: float | None = None
    recovery: Recovery = field(default_factory=Recovery)
    fast_forward: tuple[str, ...] = ()  # the first kill's, the lost attempts', the reruns'
    effects: tuple[dict[str, Any], ...] = ()  # the effects its activities said (`_effects`)
    unseen: tuple[dict[str, Any], ...] = ()  # ... and those no crash point can follow
    completions: tuple[dict[str, Any], ...] = ()  # attempts completed later, by a client
    started: frozenset[tuple[str, str, int]] = frozenset()  # attempts its workers received
    overran: tuple[str, ...] = ()  # attempts a timeout ended while a live worker ran them

    @property
    def crashes(self) -> int:
        return len(self.kills)

    @property
    def in_flight(self) -> tuple[str, ...]:
        """What the first killed worker held ("scope:position", or "NAME (held)")."""
        return self.kills[0].in_flight if self.kills else ()


class _CrashedRun:
    """The parts of one crashed run that do not change as it goes."""

    def __init__(self, session: Session, stages: list[CellPoint], workflow_id: str) -> None:
        self.session, self.stages = session, stages
        self.workflow_id = workflow_id
        per_kill = SHORT_TASK_TIMEOUT.total_seconds() + session.resume_after_s
        per_kill += GROUP_KILL_ALLOWANCE_S
        extra = max(0, len(stages) - 1) * per_kill
        self.deadline = time.monotonic() + session.deadline_s + extra
        self.names = (f"{workflow_id}-{n}" for n in itertools.count())
        self.workers: list[Worker] = []

    async def worker(self, stage: int, short: timedelta | None, warm: bool) -> Worker:
        """The worker of `stage` (0: the first); the last one does not crash. In a deploy test,
        whoever takes over runs the next version."""
        site = self.stages[stage].site() if stage < len(self.stages) else None
        started = await self.session.workers.start(
            next(self.names),
            self.workflow_id,
            site,
            self.workflow_id if site else None,
            warm=warm,
            task_timeout=short,
            deployed=stage > 0,
        )
        self.workers.append(started)
        return started

    def said(self, what: str = "effects") -> tuple[dict[str, Any], ...]:
        """What the run's activities said, as its workers heard: the effects they made
        (`_effects`), those no crash point can follow (`unseen`), their attempts completed later
        by a client (`completions`)."""
        return tuple(
            e
            for w in self.workers
            for e in getattr(w.status, what)
            if e["root"] == self.workflow_id
        )

    def refused(self) -> int:
        """Kills on the wire whose call the server no longer took when it was forwarded alone
        (its timeout came first): the run did not make that moment, as load's doing."""
        return sum(len(w.proxy.lost_alone) for w in self.workers if w.proxy is not None)

    def overran(self) -> tuple[str, ...]:
        """The attempts its workers still ran when the server began their next (`_status`)."""
        return tuple(
            f"{o['activity_type']}'s attempt {o['attempt']} still ran when attempt {o['by']} began"
            for w in self.workers
            for o in w.status.overran
        )

    def killed(self, point: CellPoint, stage: int, current: Worker, run: Started) -> bool:
        """Whether `current` was killed at `point`; False: the run ended first, which only a
        later stage may (a repeat's recovery need not pass the point again). A worker that
        exited any other way fails the cell."""
        if run.result.done():
            if stage == 0:
                raise NotReached(
                    f"this run ended with its worker alive, never at the moment the run without "
                    f"a crash reached ({run.ending()}; a workflow that takes another path from "
                    "run to run, or a moment its worker did not show)"
                )
            return False
        if current.child.returncode != -signal.SIGKILL:
            raise CellFailed(
                f"the crashing worker exited with code {current.child.returncode} before "
                f"{point.crash_at}: {self.session.workers.last_line(current)}"
            )
        return True


async def crashed_run(
    session: Session,
    stages: list[CellPoint],
    workflow_id: str,
    reference: Reference | None = None,
    shorten: bool = True,
) -> Outcome:
    """Run to the end, crashing at each of `stages` in turn: the first worker at the first, the
    worker that takes over at the next, and so on (a repeat: the same point again; a group: its
    points in the order the run reaches them). A stage after the first that the run does not
    reach ends the crashes. `shorten`: with a short workflow task timeout where a kill holds a
    workflow task; `reference`: its labels name the recovery's waits, its task timeouts are
    production's."""
    this = _CrashedRun(session, stages, workflow_id)
    fast = not session.real_timeouts
    short = task_timeout(stages, reference, shorten and fast)
    run: Started | None = None
    kills: list[Kill] = []
    lost: list[str] = []
    lost_ended: list[ActivityOf] = []
    served: set[str] = set()
    try:
        current = await this.worker(0, short, warm=False)
        successor = await this.worker(1, short, warm=True) if stages else None
        run = await session.start(workflow_id, workflow_id, short)
        for stage, point in enumerate(stages):
            waited = await until_one_ends(session, run, current, this.deadline, _ids(kills))
            served |= waited.served
            lost += waited.fast_forward
            lost_ended += waited.ended
            if not this.killed(point, stage, current, run):
                break  # a repeat: the recovery did not pass the point again (its answer)
            kills.append(await after_the_kill(session.client, run.handle, current, point, fast))
            await asyncio.sleep(session.resume_after_s)  # e.g. past an idempotency key's TTL
            assert successor is not None
            current = successor
            await session.workers.go(current, this.deadline)
            if stage + 1 < len(stages):
                successor = await this.worker(stage + 2, short, warm=True)
        waited = await until_one_ends(session, run, current, this.deadline, _ids(kills))
        served |= waited.served
        lost += waited.fast_forward
        lost_ended += waited.ended
        end, ended_at = _end(session, run, current), time.monotonic()
    except CellFailed as err:
        err.partial = _so_far(this, run, kills, lost)
        raise
    finally:
        if run is not None:
            await run.give_up()
        await session.workers.stop(this.workers)
    outcome = replace(_so_far(this, run, kills, lost), end=end, served=frozenset(served))
    if not kills:
        return outcome
    tree = read_tree(await session.histories(run.handle), outcome.served)
    one = stages[0] if len(set(stages)) == 1 else None  # a group: no one point's
    overran = len(outcome.overran)
    recovery = read_waits(tree, kills, one, reference, short, fast, lost_ended, overran)
    recovery = replace(recovery, unexplained=recovery.unexplained + this.refused())
    return replace(outcome, recovery_s=ended_at - kills[0].seen_at, recovery=recovery)


def _ids(kills: list[Kill]) -> frozenset[str]:
    return frozenset(k.identity for k in kills)


def _end(session: Session, run: Started, last: Worker) -> str:
    """How the run ended (`last`: the worker that did not crash, which may have exited)."""
    if not run.result.done():
        raise CellFailed(
            f"the worker exited with code {last.child.returncode} before the run ended: "
            f"{with_likely_cause(session.workers.last_line(last))}"
        )
    return run.ending()


def _so_far(this: _CrashedRun, run: Started | None, kills: list[Kill], lost: list[str]) -> Outcome:
    notes = (*(kills[0].fast_forward if kills else ()), *lost)
    handle = run.handle if run else None
    return Outcome(
        workflow_id=this.workflow_id,
        handle=handle,
        kills=tuple(kills),
        fast_forward=notes,
        effects=this.said(),
        unseen=this.said("unseen"),
        completions=this.said("completions"),
        started=frozenset(a for w in this.workers for a in w.status.started),
        overran=this.overran(),
    )


RunOnce = Callable[[str, bool], Awaitable[Outcome]]  # (workflow id, shorten) -> its outcome
DEADLOCKED = "a workflow task kept failing the SDK's deadlock check"
UNEXPLAINED = (
    "a workflow task outran its short timeout, or an activity attempt ended that no kill ended"
)


async def through_load(once: RunOnce, workflow_ids: Iterator[str]) -> Outcome:
    """Run the cell once (`once`); run it again, as a new run, at most LOADED_RERUNS times and
    with the production workflow task timeout, while load leaves its marks: a workflow task that
    outran the short timeout or an activity attempt no kill ended (the counts would show more
    than the crash did), or a workflow task that kept failing the SDK's 2 s deadlock check (a
    long history replayed on a starved CPU). Each rerun's outcome says why it was made."""
    why = ""
    for again in range(LOADED_RERUNS + 1):
        last = again == LOADED_RERUNS
        try:
            outcome = _noted(await once(next(workflow_ids), not again), again, why)
        except CellFailed as err:
            if isinstance(err.partial, Outcome):
                err.partial = _noted(err.partial, again, why)
            if DEADLOCK not in str(err) or last:
                raise
            why = DEADLOCKED
            continue
        if not outcome.recovery.unexplained or last:
            return outcome
        why = UNEXPLAINED
    raise AssertionError("the last rerun returns or raises")


def _noted(outcome: Outcome, again: int, why: str) -> Outcome:
    """A rerun's outcome, its own notes first, then why it was made."""
    if not again:
        return outcome
    note = (
        f"ran again ({again} of at most {LOADED_RERUNS}) with the production workflow task "
        f"timeout: {why} (a loaded machine)"
    )
    return replace(outcome, fast_forward=(*outcome.fast_forward, note))
