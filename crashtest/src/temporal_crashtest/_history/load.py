"""The marks a loaded machine leaves in a run's histories, apart from what a kill did: workflow
task timeouts and activity attempts no kill explains (`unexplained_task_timeouts`,
`unexplained_activity_attempts`), timeouts in a run without a crash (`timeouts_without_a_kill`),
and each activity's attempts (`activity_attempts`; `FAILS_BY_DESIGN` for one that fails until its
window closes) and whether its last attempt ended in a timeout of its own (`timed_out_last`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from datetime import datetime

from temporalio.api.enums.v1 import (
    EventType,
    RetryState,
    TimeoutType,
)
from temporalio.api.history.v1 import (
    ActivityTaskFailedEventAttributes,
    ActivityTaskTimedOutEventAttributes,
)

from temporal_crashtest._history.tree import LOCAL_ACTIVITY_MARKER, RunHistory


def unexplained_task_timeouts(runs: list[RunHistory], killed: set[str]) -> int:
    """How many workflow tasks timed out (start-to-close) where production's timeout would not
    have ended them: in a worker that was not killed (the identities in `killed` were); and, in
    a run with local activities (which a task run again runs again; activities are scheduled
    only by a task that completes), in a killed worker that went on to take another task (it
    outran the timeout before its kill), or unrecorded. After a workflow task fails or times
    out, the server records the first failure, then writes the retries down only once one
    succeeds: a task recorded at attempt A ended A - 2 attempts unseen. A kill after the first
    one holding the same task accounts for one (`*2`); anything more outran the short timeout
    (a loaded machine)."""
    count = 0
    for run in runs:
        local = any(
            e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
            and e.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER
            for e in run.history.events
        )
        unseen = sum(
            max(0, e.workflow_task_scheduled_event_attributes.attempt - 2)
            for e in run.history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
        )
        if local:
            count += max(0, unseen - max(0, len(killed) - 1))
        by_id = {e.event_id: e for e in run.history.events}
        for e in run.history.events:
            if e.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                continue
            timed_out = e.workflow_task_timed_out_event_attributes
            if timed_out.timeout_type != TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE:
                continue
            started = by_id.get(timed_out.started_event_id)
            identity = started.workflow_task_started_event_attributes.identity if started else ""
            lived_on = local and any(
                later.event_id > e.event_id
                and later.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
                and later.workflow_task_started_event_attributes.identity == identity
                for later in run.history.events
            )
            count += identity not in killed or lived_on
    return count


def longest_workflow_task_s(runs: list[RunHistory]) -> float:
    """The longest a workflow task of the runs took, from its start to its completion."""
    longest = 0.0
    for run in runs:
        started: dict[int, datetime] = {}
        for e in run.history.events:
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                started[e.event_id] = e.event_time.ToDatetime()
            elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                begun = started.get(e.workflow_task_completed_event_attributes.started_event_id)
                if begun is not None:
                    took = (e.event_time.ToDatetime() - begun).total_seconds()
                    longest = max(longest, took)
    return longest


def timeouts_without_a_kill(runs: list[RunHistory]) -> int:
    """In runs nobody killed a worker of: the activity attempts a timeout ended
    (`activity_timeouts`), and the workflow tasks that timed out. A live worker's heartbeat or
    task late on a loaded machine (or a workflow whose activities time out by design)."""
    tasks = sum(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
        for run in runs
        for e in run.history.events
    )
    return activity_timeouts(runs) + tasks


def activity_timeouts(runs: list[RunHistory]) -> int:
    """The activity attempts a timeout ended: a retry after a heartbeat or start-to-close
    timeout, or a last attempt (`timed_out_last`). In a run whose kills held no attempt (a wait
    cell's: killed while the run waits, nothing in flight), each is load's."""
    count = len(timed_out_last(runs))
    for run in runs:
        for e in run.history.events:
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                started = e.activity_task_started_event_attributes
                count += started.attempt > 1 and started.last_failure.HasField(
                    "timeout_failure_info"
                )
    return count


FAILS_BY_DESIGN = 10**6  # `activity_attempts`' count for one that fails until its window closes


def _activity_ids(run: RunHistory) -> dict[int, str]:
    """Each activity's id in the run, by the id of the event that scheduled it."""
    return {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_id
        for e in run.history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }


def activity_attempts(runs: list[RunHistory]) -> dict[tuple[str, str], int]:
    """The attempt each activity of the tree ended on, by (scope, activity id): a run without
    a crash, read this way, says how many attempts its activities take by design (a poll by
    retry, a service that is down at first). One that failed on every attempt until its
    schedule-to-close window closed (its last attempt retried after a failure of its own, and
    none followed) takes as many as fit in the window, which a loaded machine makes fewer or
    more: any number (`FAILS_BY_DESIGN`)."""
    found = {}
    for run in runs:
        ids = _activity_ids(run)
        for e in run.history.events:
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                started = e.activity_task_started_event_attributes
                found[run.scope, ids.get(started.scheduled_event_id, "")] = started.attempt
        for e in run.history.events:
            ended: ActivityTaskFailedEventAttributes | ActivityTaskTimedOutEventAttributes
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
                ended = e.activity_task_failed_event_attributes
            elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
                ended = e.activity_task_timed_out_event_attributes  # its window, mid-attempt
            else:
                continue
            where = (run.scope, ids.get(ended.scheduled_event_id, ""))
            window = ended.retry_state == RetryState.RETRY_STATE_TIMEOUT
            if window and found.get(where, 1) > 1:
                found[where] = FAILS_BY_DESIGN
    return found


ActivityOf = tuple[str, str]  # an activity of the tree: its run's id, its activity id
_OWN_TIMEOUTS = (TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE, TimeoutType.TIMEOUT_TYPE_HEARTBEAT)


def timed_out_last(runs: list[RunHistory]) -> dict[tuple[str, str], datetime]:
    """The activities, by (scope, activity id), whose last attempt ended in a timeout of its
    own (start-to-close or heartbeat) with no retry after it, and when: an attempt that ended
    without a retry's attempt number to show it, as the last attempt of one that fails until
    its window closes does when a loaded worker answers it late."""
    found = {}
    for run in runs:
        ids = _activity_ids(run)
        for e in run.history.events:
            if e.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
                continue
            ended = e.activity_task_timed_out_event_attributes
            if ended.failure.timeout_failure_info.timeout_type in _OWN_TIMEOUTS:
                found[run.scope, ids.get(ended.scheduled_event_id, "")] = e.event_time.ToDatetime()
    return found


def unexplained_activity_attempts(
    runs: list[RunHistory],
    kills: list[datetime],
    by_design: dict[tuple[str, str], int] | None = None,
    ended: Counter[ActivityOf] | None = None,
    timed_out_by_design: Collection[tuple[str, str]] = (),
) -> int:
    """How many activity attempts ended that no kill can have ended: an activity's recorded
    attempt A had A - 1 attempts end before it; the run without a crash took `by_design` of
    them (`activity_attempts` of the reference: a poll by retry fails on purpose). More is an
    attempt of a live worker that timed out or failed (its heartbeats late on a loaded machine,
    say), which repeats an unkeyed effect the crash did not cause.

    What a kill can have ended: in a fast-forwarded cell, `ended` says it, activity by activity
    (the attempts each dead worker held, and those lost with it, that the crash test ended at
    once); with real timeouts, each kill (`kills`, UTC, when the runner saw the worker die)
    after the activity was scheduled and before its last attempt started may have ended one
    (the worker held it, or had been handed it).

    A last attempt that its own timeout ended (`timed_out_last`), where the run without a
    crash's did not (`timed_out_by_design`), is one more ended: a kill up to that timeout may
    have ended it. (Seen on a loaded machine: the saga's bank account, which fails until its
    window closes, had its last failure reported past its 4 s start-to-close; the run failed
    with a TimeoutError for the crash to be blamed for.)"""
    count = 0
    own = timed_out_last(runs)
    for run in runs:
        scheduled = {
            e.event_id: e
            for e in run.history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        }
        for e in run.history.events:
            if e.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                continue
            started = e.activity_task_started_event_attributes
            event = scheduled.get(started.scheduled_event_id)
            at = event.event_time.ToDatetime() if event is not None else None
            activity_id = (
                event.activity_task_scheduled_event_attributes.activity_id if event else ""
            )
            expected = (by_design or {}).get((run.scope, activity_id), 1)
            timed_out = own.get((run.scope, activity_id))
            extra = timed_out is not None and (run.scope, activity_id) not in timed_out_by_design
            if ended is not None:
                may_have_ended = ended[(run.run_id, activity_id)]
            else:  # a kill after it completed explains nothing (a late heartbeat's retry)
                last = timed_out if extra and timed_out else e.event_time.ToDatetime()
                may_have_ended = sum(1 for k in kills if at is not None and at <= k <= last)
            if expected >= FAILS_BY_DESIGN:  # any number of attempts: only the timeout is news
                count += max(0, extra - may_have_ended)
            else:
                count += max(0, started.attempt + extra - expected - may_have_ended)
    return count
