"""What a workflow's history tells a crash test: its activity boundaries, and what a recovery
waited on (a SIGKILLed worker is noticed only through timeouts)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import (
    EventType,
    PendingActivityState,
    PendingWorkflowTaskState,
    TaskQueueType,
    TimeoutType,
)
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowHandle, WorkflowHistory

# A worker takes a second or two to start; a workflow task unclaimed for longer than this, on a
# task queue that no worker polls for workflows, will never be taken.
NO_POLLER_GRACE_S = 10.0


@dataclass(frozen=True)
class ScheduledActivity:
    position: int  # 1-based, in scheduling order
    activity: str  # the activity type
    occurrence: int  # which run of that type (1 for the first)
    label: str  # the type, with "#k" where the type runs more than once
    event_id: int  # its ActivityTaskScheduled event


def scheduled_activities(history: WorkflowHistory) -> list[ScheduledActivity]:
    """Every activity the run scheduled, in order (local activities are not scheduled tasks)."""
    scheduled = [
        (e.event_id, e.activity_task_scheduled_event_attributes.activity_type.name)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    total = Counter(name for _, name in scheduled)
    seen: Counter[str] = Counter()
    activities = []
    for position, (event_id, name) in enumerate(scheduled, 1):
        seen[name] += 1
        label = f"{name}#{seen[name]}" if total[name] > 1 else name
        activities.append(ScheduledActivity(position, name, seen[name], label, event_id))
    return activities


def _seconds(duration_s: float) -> str:
    return f"{duration_s:.1f} s"


def _timeout_kind(timeout_type: TimeoutType.ValueType) -> str:
    return TimeoutType.Name(timeout_type).removeprefix("TIMEOUT_TYPE_").lower().replace("_", "-")


def recovery_waits(history: WorkflowHistory) -> list[str]:
    """The timeouts the run waited on, in order: an activity attempt that timed out (the worker
    running it died) and workflow tasks that timed out (e.g. on a dead worker's sticky queue)."""
    by_id: dict[int, HistoryEvent] = {e.event_id: e for e in history.events}
    labels = {a.event_id: a.label for a in scheduled_activities(history)}
    waits = []
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = e.activity_task_started_event_attributes
            timeout = started.last_failure.timeout_failure_info
            if started.attempt < 2 or not started.last_failure.HasField("timeout_failure_info"):
                continue
            scheduled = by_id[started.scheduled_event_id].activity_task_scheduled_event_attributes
            kind = _timeout_kind(timeout.timeout_type)
            limit = {
                "heartbeat": scheduled.heartbeat_timeout,
                "start-to-close": scheduled.start_to_close_timeout,
                "schedule-to-start": scheduled.schedule_to_start_timeout,
            }.get(kind)
            size = f" {_seconds(limit.ToTimedelta().total_seconds())}" if limit else ""
            waits.append(f"{labels[started.scheduled_event_id]} {kind} timeout{size}")
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            timed_out = e.workflow_task_timed_out_event_attributes
            scheduled_at = by_id[timed_out.scheduled_event_id].event_time.ToDatetime()
            waited = (e.event_time.ToDatetime() - scheduled_at).total_seconds()
            if timed_out.timeout_type == TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START:
                waits.append(f"sticky queue timeout {_seconds(waited)}")
            else:
                waits.append(f"workflow task {_timeout_kind(timed_out.timeout_type)} timeout")
    return waits


async def stuck_workflow_task(
    client: Client, handle: WorkflowHandle[Any, Any], worker_ready: bool
) -> str | None:
    """Why the run cannot go on, if its workflow task is stuck: it keeps failing (Temporal
    retries it forever: a worker without the workflow, code that replays differently), or no
    worker has taken it for a while and none polls its task queue for workflows although the
    worker says it is ready (`worker_ready`)."""
    description = await handle.describe()
    pending = description.raw_description.pending_workflow_task
    if pending.attempt >= 2:
        history = await handle.fetch_history()
        failures = [
            e.workflow_task_failed_event_attributes.failure.message
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        ]
        if failures:
            return f"the workflow task fails on the worker: {failures[-1].strip().splitlines()[0]}"
    waiting = datetime.now(UTC) - pending.scheduled_time.ToDatetime(tzinfo=UTC)
    if (
        worker_ready
        and pending.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED
        and waiting.total_seconds() > NO_POLLER_GRACE_S
    ):
        queue = description.task_queue
        pollers = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
        if not pollers.pollers:
            return (
                f"no worker takes workflow tasks from task queue {queue}: does the factory's "
                f"Worker register the workflow {description.workflow_type}?"
            )
    return None


async def what_it_waits_on(handle: WorkflowHandle[Any, Any]) -> str:
    """For a run that is taking too long: its pending activities, and which timeout will notice
    a dead worker in each."""
    description = await handle.describe()
    pending = description.raw_description.pending_activities
    if not pending:
        return f"the run is {description.status.name.lower() if description.status else '?'}"
    history = await handle.fetch_history()
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
        attrs = scheduled.get(p.activity_id)
        if p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED and attrs is not None:
            if attrs.HasField("heartbeat_timeout") and attrs.heartbeat_timeout.ToSeconds():
                text += " (a dead worker is noticed after its heartbeat timeout, "
                text += f"{_seconds(attrs.heartbeat_timeout.ToTimedelta().total_seconds())})"
            else:
                close = attrs.start_to_close_timeout.ToTimedelta().total_seconds()
                text += (
                    " with no heartbeat timeout: a dead worker is noticed only after its "
                    f"start-to-close timeout ({_seconds(close)}); set heartbeat_timeout and "
                    "heartbeat from the activity"
                )
        parts.append(text)
    return "waiting on " + "; ".join(parts)
