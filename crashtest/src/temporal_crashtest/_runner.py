"""Crash-test a workflow at every boundary of its run's tree.

One run without a crash is the reference: its histories list the boundaries (activities and local
activities, in child workflows, in every run of a continue-as-new chain), and the user's
`observe(workflow_id)` gives the final state every other run must reach. Then, for each crash
point, a cell: a fresh workflow id and task queue, a worker process that SIGKILLs itself there
(and, with a repeat, its successor too), a fresh worker process that finishes the run, and the
observed state compared with the reference. A reset cell runs to the end, is reset to before its
boundary, and runs to the end again. The user's `drive(handle)` runs beside every run, to send
the signals and updates it waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import math
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import exceptions as temporal_errors
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from temporal_crashtest._errors import CrashTestAborted
from temporal_crashtest._fastforward import SHORT_TASK_TIMEOUT, end_held, fast_forward
from temporal_crashtest._history import (
    Boundary,
    RunHistory,
    Tree,
    Wait,
    activity_attempts,
    longest_workflow_task_s,
    read_tree,
    recovery_waits,
    timeouts_without_a_kill,
    unexplained_activity_attempts,
    unexplained_task_timeouts,
    with_likely_cause,
)
from temporal_crashtest._http import LOG_NAME as HTTP_LOG
from temporal_crashtest._http import HttpObserver, start_record
from temporal_crashtest._http import observed as observed_requests
from temporal_crashtest._interceptor import Attempt, CrashSite
from temporal_crashtest._model import CellPoint, Drive, Observe, Reference, Target, to_json
from temporal_crashtest._polling import (
    DEADLOCK,
    Going,
    Idle,
    Stuck,
    progress_of,
    tree_histories,
    what_it_waits_on,
)
from temporal_crashtest._processes import Child, Processes
from temporal_crashtest._replay import Replayed, read_replayed, write_cuts
from temporal_crashtest._report import Cell
from temporal_crashtest._status import WorkerStatus
from temporal_crashtest._timeline import Timeline, timeline_of
from temporal_crashtest.worker import GO, PARENT_PID_ENV

DEFAULT_DEADLINE_S = 120.0
DEFAULT_TASK_TIMEOUT_S = 10.0  # the server's, for a run started without one
WORKFLOW_TASK_CHECK_S = 2.0  # how often a waiting cell asks whether its run is stuck or idle
IDLE_CHECKS = 2  # a run seen idle this many checks in a row is reported
GROUP_KILL_ALLOWANCE_S = 5.0  # each kill after a group's first adds this much to its deadline
LOADED_RERUNS = 3  # a cell whose run saw load's doing (`_Run.unexplained`) is run again this often
# Past its deadline, a run whose history still grows (a loaded machine) is given this much more,
# at most OVERRUN_FACTOR deadlines in all.
PROGRESS_GRACE_S = 10.0
# An attempt the server says the live worker started, and that the worker has not said it
# received for this long, was lost on the way (its poll's answer).
LOST_AFTER_S = 10.0
OVERRUN_FACTOR = 3


@dataclass(kw_only=True, frozen=True)
class GroupRun:
    """A group's run: how many of its points it crashed at (in order), and what differed from
    the reference (None: nothing; every crashed point is cleared)."""

    workflow_id: str
    reached: int
    why: str | None
    observed: Any
    seconds: float


class _CellFailed(Exception):
    """A cell could not be run as designed (not: the state differs, which is a result)."""


@dataclass
class _Worker:
    """A worker process of a cell, and what it has told of its state."""

    name: str
    child: Child
    status: WorkerStatus


@dataclass(kw_only=True)
class _Run:
    workflow_id: str
    handle: WorkflowHandle[Any, Any] | None = None
    end: str = ""  # how the run ended (`ending`): every cell must end as the reference did
    served: set[str] = field(default_factory=set)  # the task queues its workers poll
    killed_at: float | None = None
    recovery_s: float | None = None
    crashes: int = 0
    waited_on: list[str] = field(default_factory=list)
    in_flight: list[str] = field(default_factory=list)
    fast_forward: list[str] = field(default_factory=list)
    sticky_s: float | None = None  # the killed worker's sticky queue timeout
    killed: list[str] = field(default_factory=list)  # the killed workers' identities
    kills: list[datetime] = field(default_factory=list)  # when each death was seen (UTC, naive)
    unexplained: int = 0  # tasks and attempts no kill ended (a loaded machine)
    drive: asyncio.Task[Any] | None = None


@dataclass(kw_only=True)
class _Watch:
    """What `_until_one_ends` knows of a run between its looks at it."""

    deadline: float
    latest: float  # the deadline moves on while the run progresses, never past this
    ready_at: float | None = None  # when the worker said it polls
    events: int | None = None  # the history's length when first seen, then as it grows
    progressed_at: float = -math.inf
    idle_checks: int = 0

    def time_left(self) -> float:
        """Seconds to the deadline; one a run still progressing has passed moves on a little."""
        now = time.monotonic()
        if self.deadline <= now and now - self.progressed_at < PROGRESS_GRACE_S:
            # Still going, only slowly (a loaded machine): a little longer, within bounds.
            self.deadline = min(self.latest, now + PROGRESS_GRACE_S)
        return self.deadline - now


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """A user's function, sync (in a thread of its own) or async, on this event loop (the drive,
    which is handed this loop's client). A sync one runs in a daemon thread, not the event
    loop's executor: if it never returns, waiting for it can be given up (a deadline, Ctrl-C)
    and the process still exits (the executor's threads are joined at the end of
    `asyncio.run`, a daemon thread is not)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    value = await _in_a_thread_of_its_own(fn, *args)
    if inspect.isawaitable(value):
        value = await value
    return value


async def _call_apart(fn: Callable[..., Any], *args: Any) -> Any:
    """A user's function that is handed nothing of this loop's (`observe`), sync or async, in a
    daemon thread with an event loop of its own: one that blocks (an async function calling
    `time.sleep`, a sync client) cannot stall this loop, so its deadline still comes."""
    return await _in_a_thread_of_its_own(_to_its_end, fn, *args)


def _to_its_end(fn: Callable[..., Any], *args: Any) -> Any:
    value = fn(*args)
    if inspect.isawaitable(value):
        value = asyncio.run(_awaited(value))
    return value


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


_ASK_AGAIN = {RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE}


async def _result(handle: WorkflowHandle[Any, Any]) -> Any:
    """The run's result, however long it takes: a wait whose call timed out (a server slow to
    answer, on a loaded machine) is asked again, not taken for the run's end."""
    while True:
        try:
            return await handle.result()
        except RPCError as err:
            if err.status not in _ASK_AGAIN:
                raise
            await asyncio.sleep(0.2)


def _in_a_thread_of_its_own(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # given up meanwhile
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def run() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as err:  # handed to the waiting task, as to_thread does
            result, error = None, err
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    name = getattr(fn, "__name__", "call")
    threading.Thread(target=run, name=f"crashtest-{name}", daemon=True).start()
    return future


class Runner:
    """Runs a crash test's runs on one Temporal server: the reference run (no crash), then each
    cell — a worker process started to be killed at its point, a fresh (warm, forked) worker to
    finish the run, the recovery fast-forwarded unless `real_timeouts` — and observes each run's
    final state with the user's `observe`."""

    def __init__(
        self,
        client: Client,
        address: str,
        procs: Processes,
        observe: Observe | None,
        *,
        drive: Drive | None = None,
        namespace: str = "default",
        deadline_s: float = DEFAULT_DEADLINE_S,
        real_timeouts: bool = False,
        http: HttpObserver | None = None,
        timelines: bool = False,
    ) -> None:
        self.client = client
        self.http = http
        self.keep_timelines = timelines
        self.timelines: dict[str, Any] = {}  # workflow id -> its run's timeline, as JSON
        self.labels: dict[str, str] = {}  # the reference's boundaries: "scope:position" -> label
        self.reference_workflow_id = ""
        self.http_env = start_record(http, procs.log_dir)
        self.real_timeouts = real_timeouts  # False: fast-forward every recovery
        self.address = address
        self.namespace = namespace
        self.procs = procs
        self.observe_fn = observe
        self.drive_fn = drive
        self.deadline_s = deadline_s
        self.tag = uuid.uuid4().hex[:8]
        self._runs = itertools.count(1)

    async def start_worker(
        self,
        target: Target,
        name: str,
        task_queue: str,
        crash_at: CrashSite | None = None,
        workflow_id: str | None = None,
        *,
        warm: bool = False,
        task_timeout: timedelta | None = None,
        deployed: bool = False,
    ) -> _Worker:
        """`python -m temporal_crashtest.worker` for the target, crashing at `crash_at` if given
        (`warm`: built, polling once it gets GO; `deployed`: of the version deployed, in a deploy
        test), and the channel it reports its state on."""
        factory, tree = target.version(deployed)
        args = self._worker_args(target, factory, task_queue)
        if crash_at is not None:
            args += ["--crash-at", crash_at.to_text()]
        if workflow_id is not None:
            args += ["--workflow-id", workflow_id]
        if task_timeout is not None:
            args += ["--task-timeout-s", f"{task_timeout.total_seconds():g}"]
        if warm:
            args += ["--warm"]
        status = WorkerStatus.listen(self.procs.log_dir / f"{name}.status")
        args += ["--status", str(status.path)]
        try:
            child = await self.procs.start_worker(
                name,
                args,
                tree,
                **target.env,
                **self.http_env,
                **{PARENT_PID_ENV: str(os.getpid())},
            )
        except BaseException:
            status.close()
            raise
        return _Worker(name, child, status)

    def _worker_args(self, target: Target, factory: str, task_queue: str) -> list[str]:
        """`python -m temporal_crashtest.worker`'s arguments for `factory` on `task_queue`."""
        args = ["-m", "temporal_crashtest.worker", "--worker", factory]
        args += ["--task-queue", task_queue]
        args += ["--address", self.address, "--namespace", self.namespace]
        if target.data_converter:
            args += ["--data-converter", target.data_converter]
        for plugin in target.plugins:
            args += ["--plugin", plugin]
        return args

    async def replay_pass(self, target: Target, tree: Tree) -> list[Replayed]:
        """The deploy test's replay pass (`_replay`): the old version's run without a crash,
        cut at each activity, replayed on the deployed version in a worker process of its own."""
        assert target.deploy_to is not None
        source = self.procs.log_dir / "replay.json"
        write_cuts(tree, source)
        queue = self._workflow_id("replay")
        factory, source_tree = target.version(deployed=True)
        args = [*self._worker_args(target, factory, queue), "--replay", str(source)]
        code = await self.procs.run("replay", args, self.deadline_s, source_tree, **target.env)
        out = source.with_name(source.name + ".out")
        if code != 0 or not out.exists():
            raise CrashTestAborted(
                f"the replay pass on {target.deploy_to} exited with code {code}: "
                f"{self.procs.last_line('replay')}"
            )
        return read_replayed(out)

    async def observe(self, workflow_id: str) -> Any:
        """The run's end: the user's view of it, within the deadline (`deadline_s`), the HTTP
        requests its workers sent, or both (`{"observe": ..., "http": ...}`)."""
        if self.http is None:
            return await self._users_view(workflow_id)
        sent = observed_requests(self.procs.log_dir / HTTP_LOG, workflow_id)
        if self.observe_fn is None:
            return sent
        return {"observe": await self._users_view(workflow_id), "http": sent}

    async def _users_view(self, workflow_id: str) -> Any:
        assert self.observe_fn is not None
        try:
            value = await asyncio.wait_for(
                _call_apart(self.observe_fn, workflow_id), self.deadline_s
            )
        except TimeoutError:
            raise CrashTestAborted(
                f"observe({workflow_id!r}) did not return within {self.deadline_s:g} s "
                "(--deadline-s): is it waiting on something that never comes?"
            ) from None
        except Exception as err:
            raise CrashTestAborted(
                f"observe({workflow_id!r}) raised {type(err).__name__}: {err}"
            ) from None
        return to_json(value, f"observe({workflow_id!r})")

    async def reference(self, target: Target) -> Reference:
        """Run once without a crash: the state to reach, how the run ends (completed, or failed,
        cancelled, ... by design), and the boundaries to crash at."""
        for again in range(LOADED_RERUNS + 1):
            run = _Run(workflow_id=self._workflow_id("reference"))
            try:
                await self._run(target, [], run)
            except _CellFailed as err:
                raise CrashTestAborted(f"the reference run (no crash) failed: {err}") from None
            if run.handle is None:
                raise CrashTestAborted("the reference run (no crash) did not start")
            tree = read_tree(await self._histories(run.handle), frozenset(run.served))
            if not (marks := timeouts_without_a_kill(tree.runs)):
                break
            # A timeout no kill caused: on a loaded machine, a live worker's heartbeat came late
            # and its attempt ran again (an unkeyed effect twice). Not the state to compare with.
            if again == LOADED_RERUNS:
                tree.warnings.append(
                    f"the run without a crash had {marks} timeout(s) that no kill caused in each "
                    f"of {LOADED_RERUNS + 1} runs: by design, or a loaded machine"
                )
        if not tree.boundaries:
            raise CrashTestAborted(
                "the workflow ran no activities and no local activities: there is nothing to "
                "crash" + "".join(f"; {u.boundary}: {u.why}" for u in tree.untested)
            )
        observed = await self.observe(run.workflow_id)
        self.reference_workflow_id = self.reference_workflow_id or run.workflow_id
        if self.keep_timelines:
            self.labels = {f"{b.scope}:{b.position}": b.label for b in tree.boundaries}
            self._keep(run.workflow_id, timeline_of(tree.runs, labels=self.labels))
        return Reference(observed, tree, run.end)

    async def _keep_timeline(self, run: _Run) -> None:
        """Keep the run's timeline (`keep_timelines`); one that cannot be read is left out."""
        if not self.keep_timelines or run.handle is None:
            return
        try:
            histories = await self._histories(run.handle)
        except RPCError:
            return
        self._keep(run.workflow_id, timeline_of(histories, run.kills, self.labels))

    def _keep(self, workflow_id: str, timeline: Timeline | None) -> None:
        if timeline is not None:
            self.timelines[workflow_id] = timeline.to_json()

    async def cell(self, target: Target, point: CellPoint | None, reference: Reference) -> Cell:
        """One crash (None: no crash) or reset, compared with the reference."""
        started = time.monotonic()
        crash_at = point.crash_at if point else "none"
        run = _Run(workflow_id=self._workflow_id(re.sub(r"[^\w-]", "-", crash_at)))
        error = None
        try:
            if point is not None and not point.moment.kills_a_worker:
                await self._reset(target, point, run)
            else:
                stages = [point] * point.repeat if point else []
                runs = [run]
                try:
                    await self._run_through_load(target, stages, reference, runs)
                finally:
                    run = runs[-1]
                if run.unexplained:
                    raise _CellFailed(
                        f"after {LOADED_RERUNS} runs, each still had an activity attempt or a "
                        "workflow task end that no kill ended: the machine is too loaded to tell "
                        "the crash's effects from the load's (fewer --jobs?)"
                    )
        except _CellFailed as err:
            error = str(err)
        try:
            observed = await self.observe(run.workflow_id)
        except CrashTestAborted as err:
            observed, error = None, error or str(err)
        await self._keep_timeline(run)
        diff = error or reference.differs(run.end, observed)
        activity = point.boundary.label if point else ""
        labels = {f"{b.scope}:{b.position}": b.label for b in reference.boundaries}
        return Cell(
            workflow_id=run.workflow_id,
            crash_at=crash_at,
            activity=activity,
            matches=diff is None,
            observed=observed,
            diff=diff,
            recovery_s=None if run.recovery_s is None else round(run.recovery_s, 2),
            seconds=round(time.monotonic() - started, 2),
            waited_on=run.waited_on,
            error=error,
            in_flight=[labels.get(where, where) for where in run.in_flight],
            crashes=run.crashes,
            fast_forward=run.fast_forward,
        )

    async def _run_through_load(
        self,
        target: Target,
        stages: list[CellPoint],
        reference: Reference,
        runs: list[_Run],
    ) -> None:
        """Run the cell (`runs[-1]`); run it again, as a new run appended to `runs`, at most
        LOADED_RERUNS times and with the production workflow task timeout, while load leaves
        its marks: a workflow task that outran the short timeout or an activity attempt no kill
        ended (the counts would show more than the crash did), or a workflow task that kept
        failing the SDK's 2 s deadlock check (a long history replayed on a starved CPU)."""
        why = ""
        for again in range(LOADED_RERUNS + 1):
            run, reason = runs[-1], why  # why this run was made (again > 0)
            try:
                await self._run(target, stages, run, reference, shorten=not again)
            except _CellFailed as err:
                if DEADLOCK not in str(err) or again == LOADED_RERUNS:
                    raise
                why = "a workflow task kept failing the SDK's deadlock check"
            else:
                if not run.unexplained or again == LOADED_RERUNS:
                    return
                why = "a workflow task outran its short timeout, or an activity attempt ended "
                why += "that no kill ended"
            finally:
                if again:  # after the run's own notes (its fast-forward keeps the first kill's)
                    run.fast_forward.append(
                        f"ran again ({again} of at most {LOADED_RERUNS}) with the production "
                        f"workflow task timeout: {reason} (a loaded machine)"
                    )
            what = re.sub(r"[^\w-]", "-", stages[0].crash_at if stages else "none")
            runs.append(_Run(workflow_id=self._workflow_id(what)))

    async def group(
        self, target: Target, points: list[CellPoint], reference: Reference
    ) -> GroupRun:
        """One run crashed at each of `points` in turn (in the order the run reaches them),
        compared with the reference as a whole."""
        started = time.monotonic()
        run = _Run(workflow_id=self._workflow_id(f"group-of-{len(points)}"))
        why = None
        try:
            await self._run(target, points, run, reference)
        except _CellFailed as err:
            why = str(err)
        observed = None
        if why is None:
            try:
                observed = await self.observe(run.workflow_id)
            except CrashTestAborted as err:
                why = str(err)
        await self._keep_timeline(run)
        if why is None and run.unexplained:
            why = "a workflow task or an activity attempt ended that no kill ended"
        if why is None:
            why = reference.differs(run.end, observed)
        return GroupRun(
            workflow_id=run.workflow_id,
            reached=run.crashes,
            why=why,
            observed=observed,
            seconds=round(time.monotonic() - started, 2),
        )

    def _workflow_id(self, what: str) -> str:
        """A new workflow id (and task queue) for every run, readable in the web UI."""
        return f"crashtest-{self.tag}-{next(self._runs)}-{what}"

    async def _histories(self, handle: WorkflowHandle[Any, Any]) -> list[RunHistory]:
        first = handle.first_execution_run_id or handle.result_run_id or handle.run_id or ""
        return await tree_histories(self.client, handle.id, first)

    async def _start(
        self, target: Target, run: _Run, queue: str, task_timeout: timedelta | None = None
    ) -> asyncio.Future[Any]:
        run.handle = await self.client.start_workflow(
            target.workflow,
            target.input,
            id=run.workflow_id,
            task_queue=queue,
            task_timeout=task_timeout,
        )
        if self.drive_fn is not None:
            run.drive = asyncio.ensure_future(_call(self.drive_fn, run.handle))
            run.drive.add_done_callback(lambda f: f.cancelled() or f.exception())  # seen later
        result = asyncio.ensure_future(_result(run.handle))
        result.add_done_callback(lambda f: f.cancelled() or f.exception())  # seen, not lost
        return result

    def _ended(self, run: _Run, result: asyncio.Future[Any]) -> None:
        """Record how the run ended (`ending`): completed, failed (and how), cancelled, ..."""
        error = result.exception()
        if error is not None and not isinstance(error, WorkflowFailureError):
            raise _CellFailed(f"waiting for the result: {type(error).__name__}: {error}")
        run.end = ending(error, run.workflow_id)

    async def _run(
        self,
        target: Target,
        stages: list[CellPoint],
        run: _Run,
        reference: Reference | None = None,
        shorten: bool = True,
    ) -> None:
        """Run to the end, crashing at each of `stages` in turn: the first worker at the first,
        the worker that takes over at the next, and so on (a repeat: the same point again; a
        group: its points in the order the run reaches them). Each worker that takes over is
        started warm beforehand and told to poll at the kill; unless `real_timeouts`, each
        recovery is fast-forwarded (see `fastforward`; `shorten`: with a short workflow task
        timeout where a kill holds a workflow task). A stage after the first that the run does
        not reach ends the crashes (`run.crashes` says how many were made). `reference`: its
        labels name the recovery's waits, and its task timeouts are production's."""
        crashes = len(stages)
        deadline = self._deadline(target, crashes)
        short = self._task_timeout(stages, reference, shorten)
        queue = run.workflow_id
        names = (f"{queue}-{n}" for n in itertools.count())
        workers: list[_Worker] = []

        async def worker(stage: int, warm: bool) -> _Worker:
            """The worker of `stage` (0: the first); the last one does not crash."""
            site = stages[stage].site() if stage < crashes else None
            watched = run.workflow_id if site else None
            started = await self.start_worker(
                target,
                next(names),
                queue,
                site,
                watched,
                warm=warm,
                task_timeout=short,
                deployed=stage > 0,  # in a deploy test, whoever takes over runs the next version
            )
            workers.append(started)
            return started

        result: asyncio.Future[Any] | None = None
        try:
            current = await worker(0, warm=False)
            successor = await worker(1, warm=True) if crashes else None
            result = await self._start(target, run, queue, short)
            for stage, point in enumerate(stages):
                await self._until_one_ends(run, result, current, deadline)
                if not self._killed(point, stage, current, result):
                    break  # a repeat: the recovery did not pass the point again (its answer)
                await self._after_the_kill(run, current, point)
                await asyncio.sleep(target.resume_after_s)  # e.g. past an idempotency key's TTL
                assert successor is not None
                current = successor
                await self._go(current, deadline)
                if stage + 1 < crashes:
                    successor = await worker(stage + 2, warm=True)
            await self._until_one_ends(run, result, current, deadline)
            await self._to_the_end(run, result, current, stages, reference, short)
        finally:
            await self._finish(run, result, workers)

    def _deadline(self, target: Target, crashes: int) -> float:
        """When a run of `crashes` kills is given up: `deadline_s`, and for each kill after the
        first a task timeout, the target's pause and a kill's allowance."""
        per_kill = SHORT_TASK_TIMEOUT.total_seconds() + target.resume_after_s
        per_kill += GROUP_KILL_ALLOWANCE_S
        return time.monotonic() + self.deadline_s + max(0, crashes - 1) * per_kill

    def _task_timeout(
        self, stages: list[CellPoint], reference: Reference | None, shorten: bool
    ) -> timedelta | None:
        """The short workflow task timeout to start the run with, where a kill holds a workflow
        task (or a sibling's) and timeouts are fast-forwarded; None: the workflow's own."""
        if not shorten or self.real_timeouts:
            return None
        if any(
            p.holds_a_task or (reference is not None and _has_siblings(p, reference))
            for p in stages
        ):
            return short_task_timeout(reference)
        return None

    def _killed(
        self, point: CellPoint, stage: int, current: _Worker, result: asyncio.Future[Any]
    ) -> bool:
        """Whether `current` was killed at `point`; False: the run ended first, which only a
        later stage may (a repeat's recovery need not pass the point again). A worker that
        exited any other way fails the cell."""
        if result.done():
            if stage == 0:
                raise _CellFailed(
                    f"the crash point {point.crash_at} was never "
                    "reached: the run ended while the worker was still alive"
                )
            return False
        if current.child.returncode != -signal.SIGKILL:
            raise _CellFailed(
                f"the crashing worker exited with code {current.child.returncode} "
                f"before {point.crash_at}: {self.procs.last_line(current.name)}"
            )
        return True

    async def _after_the_kill(self, run: _Run, killed: _Worker, point: CellPoint) -> None:
        """Record the kill (who, when, what the dead worker held) and, unless `real_timeouts`,
        fast-forward what the server would otherwise wait out."""
        run.crashes += 1
        killed.status.drain()  # what it wrote before it died is all there
        crash = killed.status.crash or {}
        facts = killed.status.facts
        run.killed.append(str(facts.get("identity")))
        run.kills.append(datetime.now(UTC).replace(tzinfo=None))
        if run.killed_at is None:
            run.killed_at = time.monotonic()
            run.in_flight = [f"{r['scope']}:{r['position']}" for r in crash.get("in_flight", [])]
            run.sticky_s = facts.get("sticky_s")
        if self.real_timeouts or run.handle is None:
            return
        forward = await fast_forward(
            self.client,
            run.handle,
            [Attempt(**a) for a in crash.get("attempts", [])],
            point.crash_at,
            str(facts.get("identity") or "") or None,
        )
        run.fast_forward = run.fast_forward or forward.done
        if run.crashes == 1:
            run.in_flight += [f"{name} (held)" for name in forward.also_held]

    async def _to_the_end(
        self,
        run: _Run,
        result: asyncio.Future[Any],
        last: _Worker,
        stages: list[CellPoint],
        reference: Reference | None,
        short: timedelta | None,
    ) -> None:
        """How the run ended, and for a crashed run how long its recovery took and what it
        waited on (`last`: the worker that did not crash)."""
        if not result.done():
            raise _CellFailed(
                f"the worker exited with code {last.child.returncode} before the run "
                f"ended: {with_likely_cause(self.procs.last_line(last.name))}"
            )
        self._ended(run, result)
        if run.killed_at is not None and run.handle is not None:
            run.recovery_s = time.monotonic() - run.killed_at
            one = stages[0] if len(set(stages)) == 1 else None  # a group: no one point's
            await self._read_waits(run, one, reference, short)

    async def _end_lost_attempts(self, run: _Run, progress: Going, worker: _Worker) -> None:
        """End at once, to be retried, the attempts the server says were started where they will
        never end: by a killed worker (handed to a poll it had out when it died), or by the live
        worker, which never said it received them (a poll's answer lost on a loaded machine).
        Production waits out their timeouts; the run's effects are the same either way."""
        identity = worker.status.facts.get("identity")
        worker.status.drain()
        lost = []
        for held in progress.started:
            pending = held[2]
            if pending.last_worker_identity in run.killed:
                lost.append((held, "handed to a poll of the killed worker"))
            elif pending.last_worker_identity == identity and identity:
                age = datetime.now(UTC) - pending.last_started_time.ToDatetime(tzinfo=UTC)
                received = (held[0], pending.activity_id, pending.attempt) in worker.status.started
                if not received and age.total_seconds() > LOST_AFTER_S:
                    lost.append((held, "started by the live worker, which never received it"))
        ended = await asyncio.gather(*(end_held(self.client, *h, why) for h, why in lost))
        for (held, why), ok in zip(lost, ended, strict=True):
            if ok:
                run.fast_forward.append(
                    f"{held[2].activity_type.name} attempt {held[2].attempt} ({why}) ended at "
                    "once, as its timeout would"
                )

    async def _go(self, worker: _Worker, deadline: float) -> None:
        """Tell a warm worker to poll, once it says it is built (a signal before its handler is
        set would end it)."""
        warm = asyncio.ensure_future(worker.status.warm.wait())
        exited = asyncio.ensure_future(worker.child.wait())
        try:
            await asyncio.wait(
                {warm, exited},
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            warm.cancel()
            exited.cancel()
        if not worker.status.warm.is_set():
            if worker.child.returncode is None:
                last = self.procs.last_line(worker.name)
                said = (
                    f"its last line: {last}"
                    if last and last != "(no output)"
                    else (
                        "it wrote nothing: still importing the workers' code? (a worker that "
                        "starts afresh imports everything again; see why none can be forked above, "
                        "or give each cell longer: --deadline-s)"
                    )
                )
                raise _CellFailed(f"the next worker was not built in time: {said}")
            return  # it exited: waiting for the run says how
        with contextlib.suppress(ProcessLookupError):
            worker.child.send_signal(GO)

    async def _read_waits(
        self,
        run: _Run,
        point: CellPoint | None,
        reference: Reference | None,
        short: timedelta | None,
    ) -> None:
        """What the recovery waited on in production, from the crashed run's history (a group's
        run, `point` None: only whether anything happened that no kill explains)."""
        assert run.handle is not None
        tree = read_tree(await self._histories(run.handle), frozenset(run.served))
        by_design = activity_attempts(reference.tree.runs) if reference else None
        run.unexplained = unexplained_activity_attempts(tree.runs, run.kills, by_design)
        if short is not None:
            run.unexplained += unexplained_task_timeouts(tree.runs, set(run.killed))
        if point is None:
            return
        crashed = tree.run(point.boundary.scope)
        if crashed is None:
            return
        # Scheduled event id -> the label the reference gave that boundary.
        known = reference.boundaries if reference else []
        named = {(b.scope, b.position): b.label for b in known}
        by_event = {}
        for b in tree.boundaries:
            if b.scope == point.boundary.scope and not b.local:
                for event_id in self._scheduled_ids(crashed, b):
                    by_event[event_id] = named.get((b.scope, b.position), b.label)
        production = None
        if short is not None:
            same = reference.tree.run(point.boundary.scope) if reference else None
            started = (same or crashed).history.events[0]
            attrs = started.workflow_execution_started_event_attributes
            production = attrs.workflow_task_timeout.ToTimedelta().total_seconds()
            if same is None:
                production = DEFAULT_TASK_TIMEOUT_S
        waits = recovery_waits(crashed, by_event, production, set(run.killed))
        run.waited_on = [str(wait) for wait in waits]
        if not self.real_timeouts and not point.holds_a_task and run.sticky_s:
            # The next workflow task would have gone to the dead worker's sticky queue first.
            run.waited_on.append(str(Wait("", "sticky queue", run.sticky_s)))

    @staticmethod
    def _scheduled_ids(crashed: RunHistory, b: Boundary) -> dict[int, str]:
        for e in crashed.history.events:
            if (
                e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and e.activity_task_scheduled_event_attributes.activity_id == b.activity_id
            ):
                return {e.event_id: b.label}
        return {}

    async def _finish(
        self,
        run: _Run,
        result: asyncio.Future[Any] | None,
        workers: list[_Worker],
    ) -> None:
        if run.drive is not None and not run.drive.done():
            run.drive.cancel()
        if result is not None and not result.done():
            result.cancel()
            if run.handle is not None:
                with contextlib.suppress(Exception):  # closed already, or the server is gone
                    await run.handle.terminate(reason="crashtest: the cell gave up")
        await asyncio.gather(*(self.procs.stop(w.child) for w in workers))
        for w in workers:
            w.status.close()

    async def _reset(self, target: Target, point: CellPoint, run: _Run) -> None:
        """Run to the end; reset to the workflow task before the boundary; run to the end."""
        deadline = time.monotonic() + self.deadline_s
        queue = run.workflow_id
        worker = await self.start_worker(target, f"{queue}-a", queue)
        workers = [worker]
        result: asyncio.Future[Any] | None = None
        try:
            result = await self._start(target, run, queue)
            await self._until_one_ends(run, result, worker, deadline)
            if not result.done():
                raise _CellFailed(
                    f"the worker exited before the run ended: {self.procs.last_line(worker.name)}"
                )
            self._ended(run, result)
            assert run.handle is not None
            tree = read_tree(await self._histories(run.handle), frozenset(run.served))
            b = point.boundary
            here = next(
                (o for o in tree.boundaries if (o.scope, o.position) == (b.scope, b.position)),
                None,
            )
            if here is None:
                raise _CellFailed(f"this run has no boundary {b.label} to reset to")
            await asyncio.sleep(target.resume_after_s)  # e.g. past an idempotency key's TTL
            if target.deploy_to is not None:  # the reset run is the new version's
                worker = await self._deployed_instead(target, worker, queue)
                workers.append(worker)
            try:
                reset = await self.client.workflow_service.reset_workflow_execution(
                    ResetWorkflowExecutionRequest(
                        namespace=self.client.namespace,
                        workflow_execution=WorkflowExecution(
                            workflow_id=here.workflow_id, run_id=here.run_id
                        ),
                        reason=f"crashtest: {point.crash_at}, run again from before {b.label}",
                        workflow_task_finish_event_id=here.reset_event_id,
                        request_id=str(uuid.uuid4()),
                    )
                )
            except RPCError as err:
                raise _CellFailed(f"the reset was refused: {err}") from None
            run.killed_at = time.monotonic()
            run.handle = self.client.get_workflow_handle(run.workflow_id, run_id=reset.run_id)
            result = asyncio.ensure_future(_result(run.handle))
            result.add_done_callback(lambda f: f.cancelled() or f.exception())
            run.end = ""
            await self._until_one_ends(run, result, worker, deadline)
            if not result.done():
                raise _CellFailed(
                    f"the worker exited before the reset run ended: "
                    f"{self.procs.last_line(worker.name)}"
                )
            self._ended(run, result)
            run.recovery_s = time.monotonic() - run.killed_at
        finally:
            await self._finish(run, result, workers)

    async def _deployed_instead(self, target: Target, old: _Worker, queue: str) -> _Worker:
        """A deploy before a reset: the old version's worker stops, the new one's polls."""
        await self.procs.stop(old.child)
        return await self.start_worker(target, f"{queue}-b", queue, deployed=True)

    async def _until_one_ends(
        self,
        run: _Run,
        result: asyncio.Future[Any],
        worker: _Worker,
        deadline: float,
    ) -> None:
        """Wait until the run ends or the worker exits. A run that cannot go on (a workflow task
        that keeps failing, an activity failing on every attempt, nobody polling) or that sits
        idle ends the wait within seconds; past the deadline, say what the run is waiting on."""
        exited = asyncio.ensure_future(worker.child.wait())
        latest = deadline + (OVERRUN_FACTOR - 1) * self.deadline_s
        watch = _Watch(deadline=deadline, latest=latest)
        try:
            while not (result.done() or exited.done()):
                left = watch.time_left()
                if left <= 0:
                    raise await self._past_the_deadline(run, worker)
                await asyncio.wait(
                    {result, exited},
                    timeout=min(WORKFLOW_TASK_CHECK_S, left),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if not (result.done() or exited.done()):
                    await self._look(run, worker, watch)
        finally:
            exited.cancel()
            worker.status.drain()
            run.served |= set(worker.status.facts.get("task_queues", []))

    async def _past_the_deadline(self, run: _Run, worker: _Worker) -> _CellFailed:
        """Why a run has not ended in time: a worker that never polled, or what the run waits
        on."""
        if not worker.status.ready.is_set():
            return _CellFailed(
                f"the worker did not start polling within {self.deadline_s:g} s: "
                "is the factory (--worker) still building it? Its last line: "
                f"{self.procs.last_line(worker.name)}"
            )
        assert run.handle is not None
        waits = await what_it_waits_on(run.handle, frozenset(run.killed))
        failed = [why for _, why in worker.status.task_failures.values()]
        told = f"; the worker's last workflow task failure: {failed[-1]}" if failed else ""
        return _CellFailed(f"no result within {self.deadline_s:g} s; {waits}{told}")

    async def _look(self, run: _Run, worker: _Worker, watch: _Watch) -> None:
        """One look at a run still going: the cell fails if the drive function raised, if the
        run cannot go on, or if it sat idle for IDLE_CHECKS looks; attempts lost with a dead
        worker are ended (unless `real_timeouts`)."""
        assert run.handle is not None
        if run.drive is not None and run.drive.done() and not run.drive.cancelled():
            error = run.drive.exception()
            if error is not None:
                raise _CellFailed(f"drive raised {type(error).__name__}: {error}")
        if watch.ready_at is None and worker.status.ready.is_set():
            watch.ready_at = time.monotonic()
        ready_for_s = None if watch.ready_at is None else time.monotonic() - watch.ready_at
        progress = await progress_of(
            self.client,
            run.handle,
            ready_for_s,
            worker.status.task_failures,
            worker.status.facts.get("build_id"),
        )
        if isinstance(progress, Stuck):
            raise _CellFailed(progress.why)
        if isinstance(progress, Going):
            if watch.events is not None and progress.events > watch.events:
                watch.progressed_at = time.monotonic()
            watch.events = progress.events
            if not self.real_timeouts:
                await self._end_lost_attempts(run, progress, worker)
        driving = run.drive is not None and not run.drive.done()
        idle = isinstance(progress, Idle) and not driving and watch.ready_at is not None
        watch.idle_checks = watch.idle_checks + 1 if idle else 0
        if watch.idle_checks >= IDLE_CHECKS:
            hint = (
                "pass --drive"
                if self.drive_fn is None
                else "the drive function returned without sending it"
            )
            raise _CellFailed(
                "the run is idle, waiting for something nobody sends (a signal or an "
                f"update?): {hint}"
            )


TASK_HEADROOM = 4  # the short workflow task timeout is at least this many times the longest task


def short_task_timeout(reference: Reference | None) -> timedelta:
    """The workflow task timeout of a cell whose kill holds a task: SHORT_TASK_TIMEOUT, or
    TASK_HEADROOM times the reference's longest workflow task if that is more (a framework's
    tasks take hundreds of milliseconds, and outrunning the short timeout costs a rerun), never
    more than production's."""
    if reference is None:
        return SHORT_TASK_TIMEOUT
    longest = timedelta(seconds=TASK_HEADROOM * longest_workflow_task_s(reference.tree.runs))
    return min(max(SHORT_TASK_TIMEOUT, longest), timedelta(seconds=DEFAULT_TASK_TIMEOUT_S))


def ending(error: WorkflowFailureError | None, workflow_id: str) -> str:
    """How a run ended, in words that compare equal across runs: `completed`, `failed: TYPE:
    MESSAGE` (the innermost cause; the run's own workflow id masked), `cancelled`,
    `terminated`, `timed out`."""
    if error is None:
        return "completed"
    cause: BaseException = error.cause
    if isinstance(cause, temporal_errors.CancelledError):
        return "cancelled"
    if isinstance(cause, temporal_errors.TerminatedError):
        return "terminated"
    if isinstance(cause, temporal_errors.TimeoutError):  # the workflow's own timeout
        return "timed out"
    while getattr(cause, "cause", None) is not None:
        cause = cause.cause  # type: ignore[attr-defined]
    kind = type(cause).__name__  # a TimeoutError's `type` is an enum, not a name
    if isinstance(cause, temporal_errors.ApplicationError) and cause.type:
        kind = cause.type
    message = with_likely_cause(str(getattr(cause, "message", None) or cause))
    return f"failed: {kind}: {message.replace(workflow_id, '<workflow id>')}"


def _has_siblings(point: CellPoint, reference: Reference) -> bool:
    """Whether the boundary ran beside others (scheduled by the same workflow task): then a kill
    after its effect may come while the worker holds the workflow task a sibling's completion
    started, and that task ends only at the workflow task timeout."""
    return bool(reference.siblings(point.boundary))
