"""What a workflow's history tells a crash test: its activity boundaries, and what a recovery
waited on (a SIGKILLed worker is noticed only through timeouts)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from temporalio.api.enums.v1 import EventType, PendingActivityState, TimeoutType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHandle, WorkflowHistory


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


async def what_it_waits_on(handle: WorkflowHandle) -> str:
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
