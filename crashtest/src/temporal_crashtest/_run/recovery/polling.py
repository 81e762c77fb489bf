"""What a crash test asks the server while a run goes on: the histories of the run's whole
tree, and whether a run that is taking long is stuck (and why), idle (waiting for a message
nobody sends) or going on; and, past the deadline, what it waits on. The pure reading of a
history is `_history`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import (
    EventType,
    PendingActivityState,
    PendingWorkflowTaskState,
    TaskQueueType,
    VersioningBehavior,
    WorkflowTaskFailedCause,
)
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    DescribeWorkerDeploymentRequest,
)
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowHandle, WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode

from temporal_crashtest._history.tree import RunHistory
from temporal_crashtest._history.waits import seconds_text
from temporal_crashtest._points.sites import ROOT_SCOPE, SCOPE_HEADER, decode_scope, next_run
from temporal_crashtest._worker.task_failures import DEADLOCK, with_likely_cause

# A worker takes a second or two to start; a workflow task unclaimed for longer than this, on a
# task queue that no worker polls for workflows, will never be taken. 10 s once failed a Deep
# Agent's cell on a loaded machine: its worker said it polls, and its first poll reached the
# server later still (a false "no worker takes workflow tasks").
NO_POLLER_GRACE_S = 20.0
# A run on its way to a version whose workers are gone moves once the deploy makes another
# version current, which the pinned example's worker took over 20 s to do on a loaded machine
# (the call runs the deployment's own workflow): given this long while its version is current.
ON_ITS_WAY_GRACE_S = 60.0
# Failures of an activity attempt that the worker's set-up makes, not the activity's code: no
# retry can get past them.
SET_UP_WRONG = ("failed decoding arguments", "is not registered on this worker")
# A workflow task failing the deadlock check this many times in a row is reported (a rerun, then
# the cause): the SDK then keeps the run's thread until the slow code returns, so each later
# attempt waits out the workflow task timeout first (attempt 5 came ~45 s in), past most deadlines.
DEADLOCK_ATTEMPTS = 3
NONDETERMINISM = "[TMPRL1100]"  # the SDK's "Nondeterminism error": the code no longer replays
BLOCKED_IN_PRODUCTION = (
    "in production the run stays Running, its workflow task retried at growing intervals, until "
    "a worker whose code replays its history takes it"
)
# Workflow task failures the server makes, not the workflow's code: a reset ends the task it goes
# back to as failed (the operator's doing); a completion refused because events came in while the
# task ran (UnhandledCommand: an activity's cancellation, a signal) is followed by a task with
# those events, at once. Neither says the run cannot go on: a reference run whose activity
# answered its cancellation as the workflow completed was once called stuck for it.
NOT_THE_CODE = frozenset(
    {
        WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW,
        WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND,
    }
)
PINNED = VersioningBehavior.VERSIONING_BEHAVIOR_PINNED


async def tree_histories(
    client: Client, workflow_id: str, first_run_id: str, stamped: bool = True
) -> list[RunHistory]:
    """Every run of the tree rooted at the run `first_run_id` of `workflow_id`: the runs of its
    continue-as-new chain and, at any depth, the child workflows they started (`stamped`: their
    workers are crashtest's Python processes, `RunHistory.stamped`). A run's scope is the one
    its start header carries; unstamped, none does, and it is read from the tree's shape
    (`tree_scope`), as a Python worker's interceptor would have named it."""
    runs: list[RunHistory] = []
    todo = [(workflow_id, first_run_id, ROOT_SCOPE)]
    while todo:
        wid, rid, shaped = todo.pop(0)
        history = await client.get_workflow_handle(wid, run_id=rid).fetch_history()
        if not history.events:
            continue
        started = history.events[0].workflow_execution_started_event_attributes
        where = decode_scope(started.header.fields.get(SCOPE_HEADER))
        scope = where.scope if where else shaped if not stamped else ROOT_SCOPE
        runs.append(
            RunHistory(
                scope=scope,
                workflow_id=wid,
                run_id=rid,
                workflow_type=started.workflow_type.name,
                task_queue=started.task_queue.name,
                history=history,
                stamped=stamped,
            )
        )
        todo += [(w, r, s) for w, r, s in tree_scope(history, scope)]
    return runs


def tree_scope(history: WorkflowHistory, scope: str) -> list[tuple[str, str, str]]:
    """The runs one run of scope `scope` started, each `(workflow id, run id, scope)`: the
    chain's next run (`@R+1`), and each child (`/Type#K@1`, the K-th of its type this run
    started, in the order it started them)."""
    started: list[tuple[str, str, str]] = []
    children: dict[str, int] = {}
    kth: dict[int, str] = {}  # initiated event id -> the child's scope
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            after = e.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            started.append((history.workflow_id, after, next_run(scope)))
        elif e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            kind = e.start_child_workflow_execution_initiated_event_attributes.workflow_type.name
            children[kind] = children.get(kind, 0) + 1
            kth[e.event_id] = f"{scope}/{kind}#{children[kind]}@1"
        elif e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
            attrs = e.child_workflow_execution_started_event_attributes
            child = attrs.workflow_execution
            started.append((child.workflow_id, child.run_id, kth.get(attrs.initiated_event_id, "")))
    return started


@dataclass(frozen=True)
class OpenRun:
    handle: WorkflowHandle[Any, Any]
    description: WorkflowExecutionDescription


async def open_runs(client: Client, handle: WorkflowHandle[Any, Any]) -> list[OpenRun]:
    """The run and, at any depth, its open children: each with its description. A child the
    parent has initiated but the server has not started yet (or has just closed) is not found:
    it is left out until it is there."""
    out: list[OpenRun] = []
    todo = [handle]
    while todo:
        h = todo.pop(0)
        try:
            description = await h.describe()
        except RPCError as err:
            if h is handle or err.status != RPCStatusCode.NOT_FOUND:
                raise
            continue
        out.append(OpenRun(h, description))
        for child in description.raw_description.pending_children:
            todo.append(client.get_workflow_handle(child.workflow_id, run_id=child.run_id or None))
    return out


def _open_timers(history: WorkflowHistory) -> list[float]:
    """The timers the run has started and not yet fired or cancelled: each one's length, s."""
    opened: dict[int, float] = {}
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
            length = e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
            opened[e.event_id] = length.total_seconds()
        elif e.event_type == EventType.EVENT_TYPE_TIMER_FIRED:
            opened.pop(e.timer_fired_event_attributes.started_event_id, None)
        elif e.event_type == EventType.EVENT_TYPE_TIMER_CANCELED:
            opened.pop(e.timer_canceled_event_attributes.started_event_id, None)
    return list(opened.values())


@dataclass(frozen=True)
class Going:
    """The run has something pending: an activity, a workflow task, a timer, a child. Its
    pending activities whose attempt a worker has started, as (workflow id, run id, pending):
    the runner tells those a killed worker holds, or a live one never received."""

    started: list[tuple[str, str, PendingActivityInfo]] = field(default_factory=list)
    events: int = 0  # the open runs' history events: it grows while the run makes progress


@dataclass(frozen=True)
class Idle:
    """Nothing is pending anywhere in the run's tree: it waits for a message."""


@dataclass(frozen=True)
class Stuck:
    """The run cannot go on, and why."""

    why: str


Progress = Going | Idle | Stuck


async def progress_of(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    ready_for_s: float | None,
    reported: Mapping[str, tuple[float, str]] | None = None,
    build_id: str | None = None,
    queues: frozenset[str] = frozenset(),
) -> Progress:
    """Whether the run cannot go on: a workflow task that keeps failing (Temporal retries it
    forever: a worker without the workflow, code that replays differently), an activity failing
    on every attempt, a workflow task nobody takes from a queue no worker polls although the
    worker said it is ready `ready_for_s` ago (None: it has not), or a run pinned to a version
    of a Worker Deployment other than the live worker's (`build_id`: the only worker left;
    `queues`: the task queues it polls). Or whether it sits idle. `reported`: the latest
    workflow task failure per run id, as the worker told it (when, and why: a failure after a
    task's timeout is in no history)."""
    idle = True
    started: list[tuple[str, str, PendingActivityInfo]] = []
    events = 0
    for run in await open_runs(client, handle):
        raw = run.description.raw_description
        events += raw.workflow_execution_info.history_length
        what = "" if run.handle is handle else f" (child {run.description.workflow_type})"
        pending = raw.pending_workflow_task
        if pending.attempt >= 2 and (
            failing := await _task_failure(run, pending.attempt, reported or {})
        ):
            return Stuck(f"the workflow task fails on the worker{what}: {failing}")
        for a in raw.pending_activities:
            if a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
                started.append((run.description.id, run.description.run_id, a))
            # A failing activity is hopeless only when its retry policy says so (then it is no
            # longer pending: the workflow has its failure), never after a count of attempts:
            # polling by retry is a Temporal pattern. Only a failure the worker's set-up makes
            # (an argument it cannot decode, an activity it does not register) ends the wait
            # at once: no attempt can get past it.
            if a.last_failure.message and _set_up_wrong(a.last_failure.message):
                first = with_likely_cause(a.last_failure.message)
                return Stuck(
                    f"activity {a.activity_type.name}{what} cannot run on this worker "
                    f"(attempt {a.attempt}): {first}"
                )
        # Held by Worker Versioning on a version whose workers are gone: the cause, whatever
        # polls the queue (a loaded server can show no poller of the live version for a while).
        if ready_for_s is not None and (
            pinned := await _pinned_elsewhere(client, run, build_id, ready_for_s)
        ):
            return Stuck(pinned)
        if (unpolled := await _unpolled(client, run, ready_for_s, queues)) is not None:
            return unpolled
        if (
            raw.HasField("pending_workflow_task")
            or raw.pending_activities
            or raw.pending_nexus_operations
            or run.description.status is None
            or run.description.status.name != "RUNNING"
            or _open_timers(await run.handle.fetch_history())
        ):
            idle = False
    return Idle() if idle else Going(started, events)


async def _task_failure(
    run: OpenRun, attempt: int, reported: Mapping[str, tuple[float, str]]
) -> str | None:
    """Why the run's workflow task keeps failing (its last failure), if it does: from the
    history, or, where the history shows none since the task last completed (the streak began
    with a timeout, so its failures are written nowhere), as the worker `reported` it since then.
    The SDK's deadlock detector fails a task whose code did not yield for 2 s: on a loaded
    machine that can pass on the next attempt, so only DEADLOCK_ATTEMPTS of them in a row
    count, with what it means (`DEADLOCK_CAUSE`)."""
    failures, completed_at = code_failures(await run.handle.fetch_history())
    told = reported.get(run.description.run_id)
    if not failures and told is not None and told[0] > completed_at:
        failures = [told[1]]
    if not failures or (DEADLOCK in failures[-1] and attempt < DEADLOCK_ATTEMPTS):
        return None
    if NONDETERMINISM in failures[-1]:
        return f"{with_likely_cause(failures[-1])} ({BLOCKED_IN_PRODUCTION})"
    if DEADLOCK in failures[-1]:
        return f"{with_likely_cause(failures[-1])} ({DEADLOCK_CAUSE})"
    return with_likely_cause(failures[-1])


def code_failures(history: WorkflowHistory) -> tuple[list[str], float]:
    """The messages of the workflow task failures the code made since the task last completed
    (NOT_THE_CODE's aside), and when it completed (epoch seconds; 0 if it never did)."""
    failures: list[str] = []
    completed_at = 0.0
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            failures, completed_at = [], e.event_time.ToDatetime(tzinfo=UTC).timestamp()
        elif (
            e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
            and e.workflow_task_failed_event_attributes.cause not in NOT_THE_CODE
        ):
            failures.append(e.workflow_task_failed_event_attributes.failure.message)
    return failures, completed_at


DEADLOCK_CAUSE = (
    "the workflow code ran over 2 s without yielding, on each attempt: a replay of a long "
    "history or blocking work in workflow code; production's workers fail it the same way when "
    "they are as slow"
)


async def _unpolled(
    client: Client, run: OpenRun, ready_for_s: float | None, queues: frozenset[str]
) -> Stuck | None:
    """Stuck if the run's workflow task waits on a queue no worker polls, although the worker
    said it is ready `ready_for_s` ago (None: it has not): at once for a queue it does not poll
    (not among `queues`: a child sent elsewhere), after the grace for one it says it polls (its
    first poll may reach the server late)."""
    pending = run.description.raw_description.pending_workflow_task
    # The wall's clock, not the run's: the grace is real time the worker is given, and a run's
    # clock may jump ahead while its task waits (time skipping with nothing in flight).
    waiting = datetime.now(UTC) - pending.scheduled_time.ToDatetime(tzinfo=UTC)
    queue = run.description.task_queue
    grace = NO_POLLER_GRACE_S if queue in queues or not queues else 0.0
    if not (
        ready_for_s is not None
        and ready_for_s > grace
        and pending.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED
        and waiting.total_seconds() > grace
    ):
        return None
    pollers = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    if pollers.pollers:
        return None
    return Stuck(
        f"no worker takes workflow tasks from task queue {queue}: does the factory's "
        f"Worker register the workflow {run.description.workflow_type}?"
    )


async def _pinned_elsewhere(
    client: Client, run: OpenRun, build_id: str | None, ready_for_s: float
) -> str | None:
    """Why the run hangs if Worker Versioning holds it on a version whose workers are gone (the
    live worker, the only one left after a kill, is of version `build_id`, ready `ready_for_s`
    ago): pinned to it; or on its way to it (a first workflow task the old version took and
    never finished) while it is still its deployment's current version, past ON_ITS_WAY_GRACE_S.
    Temporal gives a pinned run's tasks to that version's workers only, so it waits for one,
    Running, however long; a run on its way moves to the version made current after it (a
    deploy), which may take the deploy a while."""
    info = run.description.raw_description.workflow_execution_info.versioning_info
    if info.behavior == PINNED:
        held, how = info.deployment_version, "pinned to"
    elif ready_for_s > ON_ITS_WAY_GRACE_S:  # its first task went to a worker that died with it
        held, how = info.version_transition.deployment_version, "on its way to"
    else:
        return None
    if not held.build_id or held.build_id == build_id:
        return None
    fix = (
        "keep the old version's workers until its pinned runs end, or move them (temporal "
        "workflow update-options --versioning-override-behavior auto_upgrade)"
    )
    if how == "on its way to":
        if await _current_build_id(client, held.deployment_name) not in (held.build_id, ""):
            return None  # another version was made current: the server moves the run to it
        fix = (
            f"{held.build_id} is still the deployment's current version: make the new one "
            "current once its workers poll (temporal worker deployment set-current-version), "
            "or keep the old version's workers"
        )
    return (
        f"hanging: the run is {how} version {held.build_id} of Worker Deployment "
        f"{held.deployment_name} and no worker of it is left (the worker that took over is "
        f"{build_id or 'unversioned'}): Temporal gives its tasks to {held.build_id}'s workers "
        f"only, so in production it stays Running until one polls again; {fix}"
    )


async def _current_build_id(client: Client, deployment: str) -> str:
    """The build id of the deployment's current version ("": none, or no such deployment)."""
    try:
        described = await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment)
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return ""
        raise
    return described.worker_deployment_info.routing_config.current_deployment_version.build_id


def run_now(description: WorkflowExecutionDescription) -> datetime:
    """The run's clock: the server's times are its own, ahead of the wall's once time skipping
    moved it."""
    info = description.raw_description.workflow_extended_info
    if info.HasField("time_skipping_info"):
        return info.time_skipping_info.current_time.ToDatetime(tzinfo=UTC)
    return datetime.now(UTC)


def _set_up_wrong(message: str) -> bool:
    lowered = message.lower()
    return any(needle in lowered for needle in SET_UP_WRONG)


def _workflow_task(description: WorkflowExecutionDescription) -> str:
    """The run's pending workflow task, in words: how long it has waited, on which attempt, and
    whether a worker holds it (an empty string if none is pending)."""
    raw = description.raw_description
    if not raw.HasField("pending_workflow_task"):
        return ""
    task = raw.pending_workflow_task
    now = run_now(description)
    since = (now - task.scheduled_time.ToDatetime(tzinfo=UTC)).total_seconds()
    text = f"; its workflow task, attempt {task.attempt}, was scheduled {seconds_text(since)} ago ("
    if task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED:
        held = (now - task.started_time.ToDatetime(tzinfo=UTC)).total_seconds()
        text += f"a worker took it {seconds_text(held)} ago"
    else:
        text += "no worker has taken it yet"
    return text + ")"


async def what_it_waits_on(
    handle: WorkflowHandle[Any, Any], dead: frozenset[str] = frozenset()
) -> str:
    """For a run that is taking too long: its pending activities, and which timeout will notice
    a dead worker in each — or, for an attempt a live worker holds (not one of the killed
    workers, `dead`), that it is still running there."""
    description = await handle.describe()
    pending = description.raw_description.pending_activities
    history = await handle.fetch_history()
    timers = _open_timers(history)
    sleeping = (
        f"; a timer of {seconds_text(max(timers))} is pending (a workflow.sleep? the run waits for "
        "it; a shorter one for the crash test, or --drive to move the run on)"
        if timers
        else ""
    )
    if not pending:
        status = description.status.name.lower() if description.status else "?"
        return f"the run is {status}{_workflow_task(description)}{sleeping}"
    scheduled = {
        e.activity_task_scheduled_event_attributes.activity_id: (
            e.activity_task_scheduled_event_attributes
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    parts = []
    for p in pending:
        state = PendingActivityState.Name(p.state).removeprefix("PENDING_ACTIVITY_STATE_").lower()
        text = f"{p.activity_type.name} attempt {p.attempt} {state}"
        if p.last_failure.message:
            text += f" (last failure: {with_likely_cause(p.last_failure.message)})"
        attrs = scheduled.get(p.activity_id)
        live = p.last_worker_identity and p.last_worker_identity not in dead
        if p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED and live:
            since = run_now(description) - p.last_started_time.ToDatetime(tzinfo=UTC)
            text += (
                f" on the live worker {p.last_worker_identity}, for "
                f"{seconds_text(since.total_seconds())}: no killed worker holds it (a loaded "
                "machine, or an activity slower than --deadline-s?)"
            )
        elif p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED and attrs is not None:
            if attrs.HasField("heartbeat_timeout") and attrs.heartbeat_timeout.ToSeconds():
                text += " (a dead worker is noticed after its heartbeat timeout, "
                text += f"{seconds_text(attrs.heartbeat_timeout.ToTimedelta().total_seconds())})"
            else:
                close = attrs.start_to_close_timeout.ToTimedelta().total_seconds()
                text += (
                    " with no heartbeat timeout: a dead worker is noticed only after its "
                    f"start-to-close timeout ({seconds_text(close)}); set heartbeat_timeout and "
                    "heartbeat from the activity"
                )
        parts.append(text)
    return "waiting on " + "; ".join(parts) + sleeping
