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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from temporalio.service import RPCError

from temporal_crashtest._errors import CellFailed, CrashTestAborted, NotReached
from temporal_crashtest._history.load import timeouts_without_a_kill
from temporal_crashtest._history.timeline import timeline_of
from temporal_crashtest._history.tree import Tree, read_tree
from temporal_crashtest._observers import Observers
from temporal_crashtest._plan.reference import CellPoint, Reference
from temporal_crashtest._plan.target import Version
from temporal_crashtest._report.report import MADE_AGAIN, NOT_RETRIED, RAN_AGAIN, Cell
from temporal_crashtest._run.cell import LOADED_RERUNS, Outcome, crashed_run, through_load
from temporal_crashtest._run.reset_cell import reset_run
from temporal_crashtest._run.session import Session
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
        tree: Tree | None = None
        for again in range(LOADED_RERUNS + 1):
            try:
                run = await crashed_run(session, [], self._workflow_id("reference"))
            except CellFailed as err:
                raise CrashTestAborted(f"the reference run (no crash) failed: {err}") from None
            assert run.handle is not None
            tree = read_tree(await self.session.histories(run.handle), run.served)
            tree = tree.with_effects(list(run.effects)).with_unseen(list(run.unseen))
            tree = tree.with_completions(list(run.completions))
            if not (marks := timeouts_without_a_kill(tree.runs) + len(run.overran)):
                break
            # A timeout no kill caused: on a loaded machine, a live worker's heartbeat came late
            # and its attempt ran again (an unkeyed effect twice). Not the state to compare with.
            if again == LOADED_RERUNS:
                overran = "".join(f"; {o}" for o in run.overran)
                tree.warnings.append(
                    f"the run without a crash had {marks} timeout(s) that no kill caused in each "
                    f"of {LOADED_RERUNS + 1} runs{overran}: by design, or a loaded machine"
                )
        assert tree is not None
        if not tree.boundaries:
            raise CrashTestAborted(
                "the workflow ran no activities and no local activities: there is nothing to "
                "crash" + "".join(f"; {u.boundary}: {u.why}" for u in tree.untested)
            )
        observed = await self.observe(run.workflow_id)
        reference = Reference(observed, tree, run.end, overran=run.overran)
        self.reference_workflow_id = self.reference_workflow_id or run.workflow_id
        await self._keep_timeline(run, reference)
        return reference

    async def cell(self, point: CellPoint | None, reference: Reference) -> Cell:
        """One crash (None: no crash) or reset, compared with the reference."""
        started = time.monotonic()
        crash_at = point.crash_at if point else "none"
        outcome, error = await self._outcome(point, reference)
        if isinstance(error, NotReached):
            return Cell(
                workflow_id=outcome.workflow_id,
                crash_at=crash_at,
                activity=point.label if point else "",
                matches=True,
                observed=None,
                diff=None,
                recovery_s=None,
                seconds=round(time.monotonic() - started, 2),
                not_reached=str(error),
            )
        try:
            observed = await self.observe(outcome.workflow_id)
        except CrashTestAborted as err:
            observed, error = None, error or str(err)
        await self._keep_timeline(outcome, reference)
        error = None if error is None else str(error)
        diff = error or reference.differs(outcome.end, observed)
        labels = reference.labels()
        return Cell(
            workflow_id=outcome.workflow_id,
            crash_at=crash_at,
            activity=point.label if point else "",
            matches=diff is None,
            observed=observed,
            diff=diff,
            recovery_s=None if outcome.recovery_s is None else round(outcome.recovery_s, 2),
            seconds=round(time.monotonic() - started, 2),
            waited_on=list(outcome.recovery.waited_on),
            error=error,
            in_flight=[labels.get(where, where) for where in outcome.in_flight],
            crashes=outcome.crashes,
            fast_forward=list(outcome.fast_forward),
            retry=_retry(point, outcome) if diff else "",
        )

    async def _outcome(
        self, point: CellPoint | None, reference: Reference
    ) -> tuple[Outcome, str | CellFailed | None]:
        """The cell's run, and why it could not be run as designed (None: it could; a
        `NotReached`: its point was never reached, no verdict)."""
        what = re.sub(r"[^\w-]", "-", point.crash_at if point else "none")
        used: list[str] = []
        ids = self._workflow_ids(what, used)
        try:
            if point is not None and not point.moment.kills_a_worker:
                return await reset_run(self.session, point, next(ids)), None
            stages = [point] * point.repeat if point else []
            outcome = await through_load(
                lambda workflow_id, shorten: crashed_run(
                    self.session, stages, workflow_id, reference, shorten
                ),
                ids,
            )
        except CellFailed as err:
            partial = err.partial if isinstance(err.partial, Outcome) else None
            return partial or Outcome(workflow_id=used[-1]), (
                err if isinstance(err, NotReached) else str(err)
            )
        if outcome.recovery.unexplained:
            return outcome, (
                f"after {LOADED_RERUNS} runs, each still had an activity attempt or a workflow "
                "task end that no kill ended: the machine is too loaded to tell the crash's "
                "effects from the load's (fewer --jobs?)"
            )
        return outcome, None

    async def group(self, points: list[CellPoint], reference: Reference) -> GroupRun:
        """One run crashed at each of `points` in turn (in the order the run reaches them),
        compared with the reference as a whole."""
        started = time.monotonic()
        workflow_id = self._workflow_id(f"group-of-{len(points)}")
        observed, outcome = None, Outcome(workflow_id=workflow_id)
        try:
            outcome = await crashed_run(self.session, points, workflow_id, reference)
            observed = await self.observe(workflow_id)
            why = None
            if outcome.recovery.unexplained:
                why = "a workflow task or an activity attempt ended that no kill ended"
        except CellFailed as err:
            why = str(err)
            outcome = err.partial if isinstance(err.partial, Outcome) else outcome
        except CrashTestAborted as err:
            why = str(err)
        await self._keep_timeline(outcome, reference)
        return GroupRun(
            workflow_id=workflow_id,
            reached=outcome.crashes,
            why=why or reference.differs(outcome.end, observed),
            observed=observed,
            seconds=round(time.monotonic() - started, 2),
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

    async def observe(self, workflow_id: str) -> Any:
        """The run's end, as the observers see it."""
        return await self.observers.state(workflow_id)

    def _workflow_id(self, what: str) -> str:
        """A new workflow id (and task queue) for every run, readable in the web UI."""
        return f"crashtest-{self.tag}-{next(self._runs)}-{what}"

    def _workflow_ids(self, what: str, used: list[str]) -> Iterator[str]:
        """New workflow ids for one cell's runs (a rerun's too), each kept in `used`."""
        while True:
            used.append(self._workflow_id(what))
            yield used[-1]

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
