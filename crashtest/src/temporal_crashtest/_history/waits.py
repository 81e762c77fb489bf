"""What a recovery waited on in production, read from a crashed run's history (`recovery_waits`):
each timeout, retry interval and workflow task that stood between the kill and the run going on,
as `Wait`s the report names (`seconds_text` writes their lengths)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from temporalio.api.enums.v1 import (
    EventType,
    TimeoutType,
)
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import (
    ActivityTaskScheduledEventAttributes,
    HistoryEvent,
)

from temporal_crashtest._history.attempts import DEFAULT_BACKOFF
from temporal_crashtest._history.tree import RunHistory
from temporal_crashtest._points.sites import WORKER_KILLED


def seconds_text(duration_s: float) -> str:
    return f"{duration_s:.1f} s"


def _timeout_kind(timeout_type: TimeoutType.ValueType) -> str:
    return TimeoutType.Name(timeout_type).removeprefix("TIMEOUT_TYPE_").lower().replace("_", "-")


RETRY_INTERVAL = "retry interval"  # a Wait's kind: the retry policy's wait before an attempt


RETRY_SHOWN_S = 1.0  # a retry's wait is named from this long (a shorter one is noise)


@dataclass(frozen=True)
class Wait:
    """One timeout a recovery waits on in production: whose (a boundary's label, or "" for the
    run's own), which, and how long (None: unknown)."""

    whose: str
    timeout: str  # "heartbeat", "start-to-close", "sticky queue", "workflow task start-to-close"
    seconds: float | None = None
    then: str = ""  # what follows it, when not a retry ("the activity fails in the workflow")

    def __str__(self) -> str:
        size = f" {seconds_text(self.seconds)}" if self.seconds is not None else ""
        then = f", then {self.then}" if self.then else ""
        what = self.timeout if self.timeout == RETRY_INTERVAL else f"{self.timeout} timeout"
        return f"{self.whose} {what}{size}{then}".strip()


def recovery_waits(
    run: RunHistory,
    labels: dict[int, str] | None = None,
    task_timeout_s: float | None = None,
    killed: set[str] | None = None,
) -> list[Wait]:
    """The timeouts the run waits on in production after its worker was killed, in order: an
    activity attempt that timed out (the worker running it died), or that a fast-forward failed
    at once (`WORKER_KILLED`: the timeout it would have waited on), and workflow tasks that timed
    out (on a dead worker's sticky queue, or held by a worker that died during the task: a local
    activity, or a kill after a checkpoint). `labels`: the boundaries' labels by their
    ActivityTaskScheduled event id; `task_timeout_s`: the run's workflow task timeout in
    production, when the crash test shortened it; `killed`: the identities of the workers killed
    (a timeout before the last workflow task one of them took, on a loaded machine, is not the
    recovery's)."""
    events = run.history.events
    by_id: dict[int, HistoryEvent] = {e.event_id: e for e in events}
    started_attrs = events[0].workflow_execution_started_event_attributes
    recorded = started_attrs.workflow_task_timeout.ToTimedelta().total_seconds()
    task_timeout = task_timeout_s or recorded
    after = _last_task_of(events, killed or set())
    named = labels or {}
    waits: list[Wait] = []
    for e in events:
        if e.event_id <= after:
            continue
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            waits += _retried_after(e, by_id, named)
        elif (final := _final_timeout(e)) is not None:
            # An attempt no retry followed, ended by its timeout (or failed at once as its
            # timeout would): the workflow then saw the activity fail.
            scheduled_id, failure = final
            scheduled = by_id[scheduled_id].activity_task_scheduled_event_attributes
            kind = _timeout_kind(failure.timeout_failure_info.timeout_type)
            name = named.get(scheduled_id, scheduled.activity_type.name)
            then = "it fails in the workflow (no retry)"
            waits.append(Wait(name, kind, _length(scheduled, kind), then=then))
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            timed_out = e.workflow_task_timed_out_event_attributes
            scheduled_at = by_id[timed_out.scheduled_event_id].event_time.ToDatetime()
            waited = (e.event_time.ToDatetime() - scheduled_at).total_seconds()
            if timed_out.timeout_type == TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START:
                waits.append(Wait("", "sticky queue", waited))
            else:
                kind = _timeout_kind(timed_out.timeout_type)
                waits.append(Wait("", f"workflow task {kind}", task_timeout))
    return waits


def _last_task_of(events: Sequence[HistoryEvent], killed: set[str]) -> int:
    """The event id of the last workflow task a killed worker started (0: none): a timeout
    before it is not the recovery's."""
    return max(
        (
            e.event_id
            for e in events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
            and e.workflow_task_started_event_attributes.identity in killed
        ),
        default=0,
    )


def _retried_after(
    e: HistoryEvent, by_id: dict[int, HistoryEvent], labels: dict[int, str]
) -> list[Wait]:
    """The timeout an ActivityTaskStarted event's attempt was retried after — its previous
    attempt timed out, or was failed at once as a killed worker's (`WORKER_KILLED`) — and the
    retry policy's wait before it, when that is long enough to name; none: a first attempt, or a
    retry after an ordinary failure."""
    started = e.activity_task_started_event_attributes
    if started.attempt < 2:
        return []
    failure = started.last_failure
    scheduled = by_id[started.scheduled_event_id].activity_task_scheduled_event_attributes
    if failure.HasField("timeout_failure_info"):
        kind = _timeout_kind(failure.timeout_failure_info.timeout_type)
    elif failure.application_failure_info.type == WORKER_KILLED:
        beats = scheduled.heartbeat_timeout.ToTimedelta().total_seconds() > 0
        kind = "heartbeat" if beats else "start-to-close"
    else:
        return []
    name = labels.get(started.scheduled_event_id, scheduled.activity_type.name)
    waits = [Wait(name, kind, _length(scheduled, kind))]
    backoff = retry_wait_s(scheduled, started.attempt)
    if backoff >= RETRY_SHOWN_S:
        waits.append(Wait(name, RETRY_INTERVAL, backoff))
    return waits


def retry_wait_s(scheduled: ActivityTaskScheduledEventAttributes, attempt: int) -> float:
    """The retry policy's wait before `attempt` (2: the first retry): the initial interval
    (Temporal's default 1 s), grown by the backoff coefficient, capped by the maximum."""
    policy = scheduled.retry_policy
    first = policy.initial_interval.ToTimedelta().total_seconds() or DEFAULT_BACKOFF.total_seconds()
    grown = first * (policy.backoff_coefficient or 2.0) ** max(0, attempt - 2)
    longest = policy.maximum_interval.ToTimedelta().total_seconds()
    return min(grown, longest) if longest > 0 else min(grown, 100 * first)


def _length(scheduled: ActivityTaskScheduledEventAttributes, kind: str) -> float | None:
    """The length of the activity's timeout of `kind` (heartbeat, start-to-close, ...), s."""
    limit = {
        "heartbeat": scheduled.heartbeat_timeout,
        "start-to-close": scheduled.start_to_close_timeout,
        "schedule-to-start": scheduled.schedule_to_start_timeout,
        "schedule-to-close": scheduled.schedule_to_close_timeout,
    }.get(kind)
    return limit.ToTimedelta().total_seconds() if limit else None


def _final_timeout(e: HistoryEvent) -> tuple[int, Failure] | None:
    """(scheduled event id, failure) of an activity that ended on a timeout: timed out, or
    failed with a timeout's failure (a fast-forward's, for an attempt no retry follows)."""
    if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
        attrs = e.activity_task_timed_out_event_attributes
        failure = attrs.failure
        if not failure.HasField("timeout_failure_info") and failure.HasField("cause"):
            failure = failure.cause
        return attrs.scheduled_event_id, failure
    if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
        failed = e.activity_task_failed_event_attributes
        if failed.failure.HasField("timeout_failure_info"):
            return failed.scheduled_event_id, failed.failure
    return None
