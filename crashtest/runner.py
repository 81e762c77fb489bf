"""Crash-test a workflow at every activity boundary.

One run without a crash is the reference: its history lists the boundaries, and the user's
`observe(workflow_id)` gives the final state every other run must reach. Then, for each boundary,
a cell: a fresh workflow id and task queue, a worker process that SIGKILLs itself there, a fresh
worker process that finishes the run, and the observed state compared with the reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import itertools
import json
import os
import signal
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from crashtest.history import (
    ScheduledActivity,
    recovery_waits,
    scheduled_activities,
    stuck_workflow_task,
    what_it_waits_on,
)
from crashtest.points import CrashPoint, CrashPointError, Moment
from crashtest.processes import Processes
from crashtest.report import Cell, differences
from crashtest.worker import PARENT_PID_ENV, READY

Observe = Callable[[str], Any]
DEFAULT_DEADLINE_S = 120.0
WORKFLOW_TASK_CHECK_S = 2.0  # how often a waiting cell asks whether its workflow task fails


class CrashTestError(Exception):
    """The crash test cannot go on (the reference run failed, observe is broken, ...)."""


class _CellFailed(Exception):
    """A cell could not be run as designed (not: the state differs, which is a result)."""


@dataclass(frozen=True)
class Target:
    """What is crash-tested: how to build its worker, which workflow, with what input."""

    worker: str  # MODULE:FACTORY, FACTORY(client, task_queue) -> Worker
    workflow: str  # the workflow type name
    input: Any  # the workflow's one argument, as JSON
    data_converter: str | None = None  # MODULE:NAME, for the worker processes' clients
    env: Mapping[str, str] = field(default_factory=dict)  # more environment for the workers
    resume_after_s: float = 0.0  # wait this long after the kill before the fresh worker starts


@dataclass(frozen=True)
class Boundary:
    point: CrashPoint  # by position
    activity: str  # the label of activity N
    next: str | None  # the label of N+1, for an after-checkpoint point


@dataclass(frozen=True)
class Reference:
    observed: Any
    activities: list[ScheduledActivity]

    def boundaries(self) -> list[Boundary]:
        labels = [a.label for a in self.activities]
        effects = [
            Boundary(CrashPoint(Moment.AFTER_EFFECT, position=i), label, None)
            for i, label in enumerate(labels, 1)
        ]
        checkpoints = [
            Boundary(CrashPoint(Moment.AFTER_CHECKPOINT, position=i), label, labels[i])
            for i, label in enumerate(labels[:-1], 1)
        ]
        return effects + checkpoints

    def select(self, points: list[str] | None) -> list[Boundary]:
        """The boundaries named (by position or activity name), or all of them."""
        every = self.boundaries()
        if points is None:
            return every
        types = [a.activity for a in self.activities]
        by_point = {str(b.point): b for b in every}
        chosen = []
        for text in points:
            point = str(CrashPoint.parse(text).resolve(types))
            if point not in by_point:
                raise CrashPointError(f"{text} is not a boundary of this workflow")
            chosen.append(by_point[point])
        return list(dict.fromkeys(chosen))


@dataclass
class _Run:
    workflow_id: str
    handle: WorkflowHandle[Any, Any] | None = None
    failure: str | None = None
    recovery_s: float | None = None
    waited_on: list[str] = field(default_factory=list)


def to_json(value: object, what: str) -> Any:
    """A JSON round trip, so that tuples and lists compare equal and the report can hold it."""
    try:
        return json.loads(json.dumps(value, sort_keys=True))
    except (TypeError, ValueError) as err:
        raise CrashTestError(f"{what} returned something that is not JSON: {err}") from None


class Runner:
    def __init__(
        self,
        client: Client,
        address: str,
        procs: Processes,
        observe: Observe,
        *,
        namespace: str = "default",
        deadline_s: float = DEFAULT_DEADLINE_S,
    ) -> None:
        self.client = client
        self.address = address
        self.namespace = namespace
        self.procs = procs
        self.observe_fn = observe
        self.deadline_s = deadline_s
        self.tag = uuid.uuid4().hex[:8]
        self._runs = itertools.count(1)

    async def start_worker(
        self,
        target: Target,
        name: str,
        task_queue: str,
        crash_at: CrashPoint | None = None,
        workflow_id: str | None = None,
    ) -> asyncio.subprocess.Process:
        """`python -m crashtest.worker` for the target, crashing at `crash_at` if given."""
        args = ["-m", "crashtest.worker", "--worker", target.worker, "--task-queue", task_queue]
        args += ["--address", self.address, "--namespace", self.namespace]
        if target.data_converter:
            args += ["--data-converter", target.data_converter]
        if crash_at is not None:
            args += ["--crash-at", str(crash_at)]
        if workflow_id is not None:
            args += ["--workflow-id", workflow_id]
        return await self.procs.start(
            name, args, **target.env, **{PARENT_PID_ENV: str(os.getpid())}
        )

    async def observe(self, workflow_id: str) -> Any:
        try:
            if inspect.iscoroutinefunction(self.observe_fn):
                value = await self.observe_fn(workflow_id)
            else:
                value = await asyncio.to_thread(self.observe_fn, workflow_id)
                if inspect.isawaitable(value):
                    value = await value
        except Exception as err:
            raise CrashTestError(
                f"observe({workflow_id!r}) raised {type(err).__name__}: {err}"
            ) from None
        return to_json(value, f"observe({workflow_id!r})")

    async def reference(self, target: Target) -> Reference:
        """Run once without a crash: the state to reach, and the boundaries to crash at."""
        run = _Run(self._workflow_id("reference"))
        try:
            await self._run(target, None, run)
        except _CellFailed as err:
            raise CrashTestError(f"the reference run (no crash) failed: {err}") from None
        if run.failure is not None or run.handle is None:
            raise CrashTestError(f"the reference run (no crash) failed: {run.failure}")
        history = await run.handle.fetch_history()
        activities = scheduled_activities(history)
        if not activities:
            raise CrashTestError("the workflow ran no activities: there is nothing to crash")
        observed = await self.observe(run.workflow_id)
        return Reference(observed, activities)

    async def cell(self, target: Target, boundary: Boundary | None, reference: Reference) -> Cell:
        """One crash at `boundary` (None: no crash), compared with the reference."""
        started = time.monotonic()
        point = str(boundary.point) if boundary else "none"
        run = _Run(self._workflow_id(point.replace(":", "-")))
        error = None
        try:
            await self._run(target, boundary, run)
        except _CellFailed as err:
            error = str(err)
        try:
            observed = await self.observe(run.workflow_id)
        except CrashTestError as err:
            observed, error = None, error or str(err)
        diff = error or run.failure or differences(reference.observed, observed)
        activity = boundary.activity if boundary else ""
        if boundary is not None and boundary.next is not None:
            activity += f" → {boundary.next}"
        return Cell(
            workflow_id=run.workflow_id,
            crash_at=point,
            activity=activity,
            matches=error is None and run.failure is None and observed == reference.observed,
            observed=observed,
            diff=diff,
            recovery_s=None if run.recovery_s is None else round(run.recovery_s, 2),
            seconds=round(time.monotonic() - started, 2),
            waited_on=run.waited_on,
            error=error,
        )

    def _workflow_id(self, what: str) -> str:
        """A new workflow id (and task queue) for every run, readable in the web UI."""
        return f"crashtest-{self.tag}-{next(self._runs)}-{what}"

    async def _run(self, target: Target, boundary: Boundary | None, run: _Run) -> None:
        deadline = time.monotonic() + self.deadline_s
        queue = run.workflow_id
        crash_at = boundary.point if boundary else None
        worker = await self.start_worker(
            target, f"{queue}-a", queue, crash_at, run.workflow_id if crash_at else None
        )
        workers = [worker]
        result: asyncio.Future[Any] | None = None
        try:
            run.handle = await self.client.start_workflow(
                target.workflow, target.input, id=run.workflow_id, task_queue=queue
            )
            result = asyncio.ensure_future(run.handle.result())
            result.add_done_callback(lambda f: f.cancelled() or f.exception())  # seen, not lost
            if crash_at is not None:
                await self._until_one_ends(run.handle, result, worker, f"{queue}-a", deadline)
                if result.done():
                    raise _CellFailed(
                        f"the crash point {crash_at} was never reached: the run ended while "
                        "the worker was still alive"
                    )
                if worker.returncode != -signal.SIGKILL:
                    raise _CellFailed(
                        f"the crashing worker exited with code {worker.returncode} before "
                        f"{crash_at}: {self.procs.last_line(f'{queue}-a')}"
                    )
                killed_at = time.monotonic()
                await asyncio.sleep(target.resume_after_s)  # e.g. past an idempotency key's TTL
                worker = await self.start_worker(target, f"{queue}-b", queue)
                workers.append(worker)
            name = f"{queue}-{'b' if crash_at else 'a'}"
            await self._until_one_ends(run.handle, result, worker, name, deadline)
            if not result.done():
                raise _CellFailed(
                    f"the worker exited with code {worker.returncode} before the run ended: "
                    f"{self.procs.last_line(name)}"
                )
            error = result.exception()
            if isinstance(error, WorkflowFailureError):
                cause = error.cause
                run.failure = f"the run failed: {getattr(cause, 'message', None) or cause}"
            elif error is not None:
                raise _CellFailed(f"waiting for the result: {type(error).__name__}: {error}")
            if crash_at is not None:
                run.recovery_s = time.monotonic() - killed_at
                run.waited_on = recovery_waits(await run.handle.fetch_history())
        finally:
            if result is not None and not result.done():
                result.cancel()
                if run.handle is not None:
                    with contextlib.suppress(Exception):  # closed already, or the server is gone
                        await run.handle.terminate(reason="crashtest: the cell gave up")
            await asyncio.gather(*(self.procs.stop(w) for w in workers))

    async def _until_one_ends(
        self,
        handle: WorkflowHandle[Any, Any],
        result: asyncio.Future[Any],
        worker: asyncio.subprocess.Process,
        name: str,
        deadline: float,
    ) -> None:
        """Wait until the run ends or the worker exits. A workflow task that keeps failing (a
        worker without the workflow, a nondeterministic replay) ends the wait at once; past the
        deadline, say what the run is waiting on."""
        exited = asyncio.ensure_future(worker.wait())
        try:
            while not (result.done() or exited.done()):
                left = deadline - time.monotonic()
                if left <= 0:
                    waits = await what_it_waits_on(handle)
                    raise _CellFailed(f"no result within {self.deadline_s:g} s; {waits}")
                await asyncio.wait(
                    {result, exited},
                    timeout=min(WORKFLOW_TASK_CHECK_S, left),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if not (result.done() or exited.done()):
                    ready = READY in self.procs.log(name)
                    stuck = await stuck_workflow_task(self.client, handle, ready)
                    if stuck is not None:
                        raise _CellFailed(stuck)
        finally:
            exited.cancel()


def replace_observe(runner: Runner, observe: Observe) -> Runner:
    """The same runner (client, processes, deadline, workflow ids) with another view of the
    final state."""
    other = copy.copy(runner)
    other.observe_fn = observe
    return other


ProgressFn = Callable[[int, int, Cell], None]


async def run_cells(
    runner: Runner,
    target: Target,
    boundaries: list[Boundary],
    reference: Reference,
    jobs: int,
    progress: ProgressFn | None = None,
) -> list[Cell]:
    """Every boundary's cell, `jobs` at a time, in the order given."""
    limit = asyncio.Semaphore(jobs)
    finished = 0

    async def one(boundary: Boundary) -> Cell:
        nonlocal finished
        async with limit:
            cell = await runner.cell(target, boundary, reference)
        finished += 1
        if progress is not None:
            progress(finished, len(boundaries), cell)
        return cell

    return list(await asyncio.gather(*(one(b) for b in boundaries)))
