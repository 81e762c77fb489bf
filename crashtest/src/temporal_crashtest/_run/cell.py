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
from temporal_crashtest._history.load import (
    ActivityOf,
    longest_workflow_task_s,
    timeouts_without_a_kill,
)
from temporal_crashtest._history.tree import Tree, read_tree
from temporal_crashtest._plan.reference import CellPoint, Reference
from temporal_crashtest._run.recovery.fastforward import LEFT_TO_ITS_TIMEOUT, SHORT_TASK_TIMEOUT
from temporal_crashtest._run.recovery.kills import (
    DEFAULT_TASK_TIMEOUT_S,
    Kill,
    Recovery,
    after_the_kill,
    read_waits,
)
from temporal_crashtest._run.recovery.waiting import until_one_ends
from temporal_crashtest._run.session import Session, Started
from temporal_crashtest._run.workers import Worker
from temporal_crashtest._worker.task_failures import DEADLOCK, with_likely_cause

GROUP_KILL_ALLOWANCE_S = 5.0  # each kill after a group's first adds this much to its deadline
TASK_HEADROOM = 4  # the short workflow task timeout is at least this many times the longest task
LOADED_RERUNS = 3  # a cell whose run saw load's doing (`Outcome.unexplained`) is run this often


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a run came to: how it ended (`_session.ending`), its kills, its recovery; or why it
    could not be run as designed (`failed`), or never reached its first point (`not_reached`),
    with what it had come to by then."""

    workflow_id: str
    handle: WorkflowHandle[Any, Any] | None = None
    end: str = ""
    tree: Tree | None = None  # its histories, read once it ended
    failed: str | None = None  # it could not be run as designed (not: its state differs)
    not_reached: str | None = None  # its first point never came: no verdict
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
    def ran(self) -> bool:
        """It ran as designed, to its end (whatever its state)."""
        return self.failed is None and self.not_reached is None

    @property
    def crashes(self) -> int:
        return len(self.kills)

    @property
    def in_flight(self) -> tuple[str, ...]:
        """What the first killed worker held ("scope:position", or "NAME (held)")."""
        return self.kills[0].in_flight if self.kills else ()


class _CrashedRun:
    """One crashed run as it goes: its workers, its run's handle, its kills, what the waits
    between them failed at once (`lost`) and saw end (`lost_ended`), the task queues served;
    what it came to so far is an `Outcome` (`so_far`)."""

    def __init__(self, session: Session, stages: list[CellPoint], workflow_id: str) -> None:
        self.session, self.stages = session, stages
        self.workflow_id = workflow_id
        per_kill = SHORT_TASK_TIMEOUT.total_seconds() + session.resume_after_s
        per_kill += GROUP_KILL_ALLOWANCE_S
        extra = max(0, len(stages) - 1) * per_kill
        self.deadline = time.monotonic() + session.deadline_s + extra
        self.names = (f"{workflow_id}-{n}" for n in itertools.count())
        self.workers: list[Worker] = []
        self.run: Started | None = None
        self.kills: list[Kill] = []
        self.lost: list[str] = []
        self.lost_ended: list[ActivityOf] = []
        self.served: set[str] = set()

    async def until_one_ends(self, run: Started, current: Worker) -> None:
        """Wait for the run's end or `current`'s, keeping what the wait saw."""
        kills = frozenset(k.identity for k in self.kills)
        waited = await until_one_ends(self.session, run, current, self.deadline, kills)
        self.served |= waited.served
        self.lost += waited.fast_forward
        self.lost_ended += waited.ended

    def so_far(self) -> Outcome:
        """What the run has come to."""
        return Outcome(
            workflow_id=self.workflow_id,
            handle=self.run.handle if self.run else None,
            kills=tuple(self.kills),
            fast_forward=(*(self.kills[0].fast_forward if self.kills else ()), *self.lost),
            served=frozenset(self.served),
            effects=self.said(),
            unseen=self.said("unseen"),
            completions=self.said("completions"),
            started=frozenset(a for w in self.workers for a in w.status.started),
            overran=self.overran(),
        )

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
    short = _task_timeout(stages, reference, shorten and fast)
    try:
        current = await this.worker(0, short, warm=False)
        successor = await this.worker(1, short, warm=True) if stages else None
        run = this.run = await session.start(workflow_id, workflow_id, short)
        for stage, point in enumerate(stages):
            await this.until_one_ends(run, current)
            if not this.killed(point, stage, current, run):
                break  # a repeat: the recovery did not pass the point again (its answer)
            this.kills.append(
                await after_the_kill(session.client, run.handle, current, point, fast)
            )
            await asyncio.sleep(session.resume_after_s)  # e.g. past an idempotency key's TTL
            assert successor is not None
            current = successor
            await session.workers.go(current, this.deadline)
            if stage + 1 < len(stages):
                successor = await this.worker(stage + 2, short, warm=True)
        await this.until_one_ends(run, current)
        end, ended_at = _end(session, run, current), time.monotonic()
    except NotReached as err:
        return replace(this.so_far(), not_reached=str(err))
    except CellFailed as err:
        return replace(this.so_far(), failed=str(err))
    finally:
        if this.run is not None:
            await this.run.give_up()
        await session.workers.stop(this.workers)
    tree = read_tree(await session.histories(run.handle), frozenset(this.served))
    outcome = replace(this.so_far(), end=end, tree=tree)
    if not this.kills:  # load's marks on a run no kill touched: timeouts, attempts that overran
        unexplained = timeouts_without_a_kill(tree.runs) + len(outcome.overran)
        return replace(outcome, recovery=Recovery(unexplained=unexplained))
    one = stages[0] if len(set(stages)) == 1 else None  # a group: no one point's
    recovery = read_waits(
        tree, this.kills, one, reference, short, fast, this.lost_ended, len(outcome.overran)
    )
    late = sum(1 for line in outcome.fast_forward if line.startswith(LEFT_TO_ITS_TIMEOUT))
    recovery = replace(recovery, unexplained=recovery.unexplained + this.refused() + late)
    return replace(outcome, recovery_s=ended_at - this.kills[0].seen_at, recovery=recovery)


def _task_timeout(
    stages: list[CellPoint], reference: Reference | None, shorten: bool
) -> timedelta | None:
    """The short workflow task timeout to start a fast-forwarded run with, where a kill holds a
    workflow task (or a sibling's); None: the workflow's own."""
    if not shorten:
        return None
    if any(
        p.holds_a_task or (reference is not None and bool(reference.siblings(p.boundary)))
        for p in stages
    ):
        return _short_task_timeout(reference)
    return None


def _short_task_timeout(reference: Reference | None) -> timedelta:
    """The workflow task timeout of a cell whose kill holds a task: SHORT_TASK_TIMEOUT, or
    TASK_HEADROOM times the reference's longest workflow task if that is more (a framework's
    tasks take hundreds of milliseconds, and outrunning the short timeout costs a rerun), never
    more than production's. A boundary that ran beside others (scheduled by the same workflow
    task) counts as holding one: a kill after its effect may come while the worker holds the
    task a sibling's completion started."""
    if reference is None:
        return SHORT_TASK_TIMEOUT
    longest = timedelta(seconds=TASK_HEADROOM * longest_workflow_task_s(reference.tree.runs))
    return min(max(SHORT_TASK_TIMEOUT, longest), timedelta(seconds=DEFAULT_TASK_TIMEOUT_S))


def _end(session: Session, run: Started, last: Worker) -> str:
    """How the run ended (`last`: the worker that did not crash, which may have exited)."""
    if not run.result.done():
        raise CellFailed(
            f"the worker exited with code {last.child.returncode} before the run ended: "
            f"{with_likely_cause(session.workers.last_line(last))}"
        )
    return run.ending()


RunOnce = Callable[[str, bool], Awaitable[Outcome]]  # (workflow id, shorten) -> its outcome
DEADLOCKED = "a workflow task kept failing the SDK's deadlock check"
UNEXPLAINED = (
    "a workflow task outran its short timeout, or an activity attempt ended that no kill ended"
)


async def through_load(once: RunOnce, workflow_ids: Iterator[str]) -> Outcome:
    """Run once (`once`); run again, as a new run, at most LOADED_RERUNS times and with the
    production workflow task timeout, while load leaves its marks: a workflow task that outran
    the short timeout, an activity attempt no kill ended, or a timeout in a run no kill touched
    (the counts would show more than the crash did), or a workflow task that kept failing the
    SDK's 2 s deadlock check (a long history replayed on a starved CPU). Each rerun's outcome
    says why it was made. The one policy for every run: the reference's, a cell's."""
    why = ""
    for again in range(LOADED_RERUNS + 1):
        last = again == LOADED_RERUNS
        outcome = _noted(await once(next(workflow_ids), not again), again, why)
        if outcome.failed is not None:
            if DEADLOCK not in outcome.failed or last:
                return outcome
            why = DEADLOCKED
        elif not outcome.recovery.unexplained or last:
            return outcome
        else:
            why = UNEXPLAINED
    raise AssertionError("the last rerun returns")


def _noted(outcome: Outcome, again: int, why: str) -> Outcome:
    """A rerun's outcome, its own notes first, then why it was made."""
    if not again:
        return outcome
    note = (
        f"ran again ({again} of at most {LOADED_RERUNS}) with the production workflow task "
        f"timeout: {why} (a loaded machine)"
    )
    return replace(outcome, fast_forward=(*outcome.fast_forward, note))
