"""Crash-test a workflow at every boundary of its run's tree: the front of the runs.

One run without a crash is the reference: its histories list the boundaries (activities and local
activities, in child workflows, in every run of a continue-as-new chain), and the observers
(`_observers`) give the final state every other run must reach. Then, for each crash point, a
cell: a fresh workflow id and task queue, a worker process that SIGKILLs itself there (and, with
a repeat, its successor too), a fresh worker process that finishes the run (`_cell`), and the
observed state compared with the reference; a reset cell runs to the end, is reset to before its
boundary, and runs to the end again (`_reset_cell`). A group's run crashes at several points in
turn (`_groups`). The user's `drive(handle)` runs beside every run, to send the signals and
updates it waits for.
"""

from __future__ import annotations

import itertools
import re
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from temporalio.service import RPCError

from temporal_crashtest._errors import CrashTestAborted
from temporal_crashtest._history.timeline import timeline_of
from temporal_crashtest._history.tree import Tree
from temporal_crashtest._observers import Observers
from temporal_crashtest._plan.reference import CellPoint, Reference
from temporal_crashtest._plan.target import Version
from temporal_crashtest._report.report import MADE_AGAIN, NOT_RETRIED, RAN_AGAIN, Cell
from temporal_crashtest._run.cell import LOADED_RERUNS, Outcome, crashed_run, through_load
from temporal_crashtest._run.reset_cell import reset_run
from temporal_crashtest._run.session import Session
from temporal_crashtest._run.wait_cell import wait_run
from temporal_crashtest._worker.replay import Replayed, read_replayed, write_cuts


@dataclass(kw_only=True, frozen=True)
class GroupRun:
    """A group's run: how many of its points it crashed at (in order), and what differed from
    the reference (None: nothing; every crashed point is cleared)."""

    workflow_id: str
    reached: int
    why: str | None
    observed: Any
    seconds: float
    workflow_s: float = 0.0  # the workflow time its run covered (`Cell.workflow_s`)


def _workflow_s(outcome: Outcome) -> float:
    """The workflow time the run covered, first event to last (0: its histories were not read)."""
    return outcome.tree.span().total_seconds() if outcome.tree else 0.0


def _retry(point: CellPoint | None, outcome: Outcome) -> str:
    """Killed inside an activity, after an effect: what its next attempt did — made an effect
    again (its attempts said effects more than once), ran again without one, or never ran (its
    retry policy left none). "" for a kill anywhere else."""
    if point is None or not point.moment.kills_at_an_effect or not outcome.kills:
        return ""
    b = point.boundary
    said = {
        int(e.get("attempt") or 0)
        for e in outcome.effects
        if (e.get("scope"), e.get("position")) == (b.scope, b.position)
    }
    if len(said) > 1:
        return MADE_AGAIN
    killed = min(said, default=1)
    ran = any(
        activity_id == b.activity_id
        and attempt > killed
        and workflow_id.startswith(outcome.workflow_id)  # its run: the root's, or a child's
        for workflow_id, activity_id, attempt in outcome.started
    )
    return RAN_AGAIN if ran else NOT_RETRIED


TOO_LOADED = (
    f"after {LOADED_RERUNS} runs, each still had an activity attempt or a workflow task end that "
    "no kill ended: the machine is too loaded to tell the crash's effects from the load's (fewer "
    "--jobs?)"
)


def _since(started: float) -> float:
    return round(time.monotonic() - started, 2)


class Runner:
    """Runs a crash test's runs on one Temporal server (`session`): the reference run (no
    crash), each cell, each group, and observes each run's final state (`observers`); with
    `timelines`, keeps each run's timeline (`timelines`, by workflow id, as JSON)."""

    def __init__(self, session: Session, observers: Observers, *, timelines: bool = False) -> None:
        self.session = session
        self.observers = observers
        self.keep_timelines = timelines
        self.timelines: dict[str, Any] = {}
        self.reference_workflow_id = ""
        self.tag = uuid.uuid4().hex[:8]
        self._runs = itertools.count(1)

    async def reference(self, alone: Version | None = None) -> Reference:
        """Run once without a crash: the state to reach, how the run ends (completed, or failed,
        cancelled, ... by design), and the boundaries to crash at (`alone`: of that version
        alone, in a deploy test)."""
        session = self.session if alone is None else self.session.alone(alone)
        run = await through_load(
            lambda workflow_id, _: crashed_run(session, [], workflow_id),
            (self._workflow_id("reference") for _ in itertools.count()),
        )
        if not run.ran or run.tree is None:
            raise CrashTestAborted(
                f"the reference run (no crash) failed: {run.failed or run.not_reached}"
            )
        tree = run.tree.with_effects(list(run.effects)).with_unseen(list(run.unseen))
        tree = tree.with_completions(list(run.completions))
        if marks := run.recovery.unexplained:
            # A timeout no kill caused: on a loaded machine, a live worker's heartbeat came late
            # and its attempt ran again (an unkeyed effect twice), in every run: said, not hidden.
            overran = "".join(f"; {o}" for o in run.overran)
            tree = tree.with_warning(
                f"the run without a crash had {marks} timeout(s) that no kill caused in each "
                f"of {LOADED_RERUNS + 1} runs{overran}: by design, or a loaded machine"
            )
        if not tree.boundaries:
            raise CrashTestAborted(
                "the workflow ran no activities and no local activities: there is nothing to "
                "crash" + "".join(f"; {u.boundary}: {u.why}" for u in tree.untested)
            )
        observed = await self.observers.state(run.workflow_id)
        reference = Reference(observed, tree, run.end, overran=run.overran)
        self.reference_workflow_id = self.reference_workflow_id or run.workflow_id
        await self._keep_timeline(run, reference)
        return reference

    async def cell(self, point: CellPoint | None, reference: Reference) -> Cell:
        """One crash (None: no crash) or reset, compared with the reference."""
        started = time.monotonic()
        outcome = await self._outcome(point, reference)
        row = Cell(
            workflow_id=outcome.workflow_id,
            crash_at=point.crash_at if point else "none",
            activity=point.label if point else "",
            matches=True,
            observed=None,
            diff=None,
            recovery_s=None,
            seconds=0.0,
        )
        if outcome.not_reached is not None:
            return replace(row, seconds=_since(started), not_reached=outcome.not_reached)
        observed, error = None, outcome.failed
        try:
            observed = await self.observers.state(outcome.workflow_id)
        except CrashTestAborted as err:
            error = error or str(err)
        await self._keep_timeline(outcome, reference)
        diff = error or reference.differs(outcome.end, observed)
        labels = reference.labels()
        return replace(
            row,
            matches=diff is None,
            observed=observed,
            diff=diff,
            recovery_s=None if outcome.recovery_s is None else round(outcome.recovery_s, 2),
            seconds=_since(started),
            waited_on=list(outcome.recovery.waited_on),
            error=error,
            in_flight=[labels.get(where, where) for where in outcome.in_flight],
            crashes=outcome.crashes,
            fast_forward=list(outcome.fast_forward),
            retry=_retry(point, outcome) if diff else "",
            workflow_s=_workflow_s(outcome),
        )

    async def _outcome(self, point: CellPoint | None, reference: Reference) -> Outcome:
        """The cell's run: a reset's, or a crash's through load (`through_load`); one that load
        marked in every rerun could not be run as designed (`Outcome.failed`)."""
        what = re.sub(r"[^\w-]", "-", point.crash_at if point else "none")
        ids = (self._workflow_id(what) for _ in itertools.count())
        waiting = point is not None and point.moment.kills_while_waiting
        if point is not None and not point.moment.kills_a_worker and not waiting:
            return await reset_run(self.session, point, next(ids))
        stages = [point] * point.repeat if point else []
        if point is not None and waiting:
            outcome = await through_load(
                lambda workflow_id, _: wait_run(self.session, point, workflow_id), ids
            )
        else:
            outcome = await through_load(
                lambda workflow_id, shorten: crashed_run(
                    self.session, stages, workflow_id, reference, shorten
                ),
                ids,
            )
        if outcome.ran and outcome.recovery.unexplained:
            return replace(outcome, failed=TOO_LOADED)
        return outcome

    async def group(self, points: list[CellPoint], reference: Reference) -> GroupRun:
        """One run crashed at each of `points` in turn (in the order the run reaches them),
        compared with the reference as a whole."""
        started = time.monotonic()
        workflow_id = self._workflow_id(f"group-of-{len(points)}")
        outcome = await crashed_run(self.session, points, workflow_id, reference)
        why, observed = outcome.failed or outcome.not_reached, None
        if why is None and outcome.recovery.unexplained:
            why = "a workflow task or an activity attempt ended that no kill ended"
        if outcome.ran:
            try:
                observed = await self.observers.state(workflow_id)
            except CrashTestAborted as err:
                why = why or str(err)
        await self._keep_timeline(outcome, reference)
        return GroupRun(
            workflow_id=workflow_id,
            reached=outcome.crashes,
            why=why or reference.differs(outcome.end, observed),
            observed=observed,
            seconds=round(time.monotonic() - started, 2),
            workflow_s=_workflow_s(outcome),
        )

    async def replay_pass(self, tree: Tree) -> list[Replayed]:
        """The deploy test's replay pass (`_replay`): the old version's run without a crash,
        cut at each activity, replayed on the deployed version in a worker process of its own."""
        workers = self.session.workers
        source = workers.procs.log_dir / "replay.json"
        write_cuts(tree, source)
        new = self.session.target.version(deployed=True)
        queue = self._workflow_id("replay")
        args = [*workers.args(new.factory, queue), "--replay", str(source)]
        deadline_s = self.session.deadline_s
        env = self.session.target.env
        code = await workers.procs.run("replay", args, deadline_s, new.tree, **env)
        out = source.with_name(source.name + ".out")
        if code != 0 or not out.exists():
            raise CrashTestAborted(
                f"the replay pass on {new} exited with code "
                f"{code}: {workers.procs.last_line('replay')}"
            )
        return read_replayed(out)

    def _workflow_id(self, what: str) -> str:
        """A new workflow id (and task queue) for every run, readable in the web UI."""
        return f"crashtest-{self.tag}-{next(self._runs)}-{what}"

    async def _keep_timeline(self, outcome: Outcome, reference: Reference) -> None:
        """Keep the run's timeline (`keep_timelines`); one that cannot be read is left out."""
        if not self.keep_timelines or outcome.handle is None:
            return
        try:
            histories = await self.session.histories(outcome.handle)
        except RPCError:
            return
        kills = [k.at for k in outcome.kills]
        timeline = timeline_of(histories, kills, reference.labels())
        if timeline is not None:
            self.timelines[outcome.workflow_id] = timeline.to_json()
