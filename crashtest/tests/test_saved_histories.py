"""Reading a recovery from a saved history, in-process: the histories in histories/ are real
crash-test cells of the notes app (`record_histories.py` made them), fast-forwarded and with
`--real-timeouts`; what the tool reads from each must be what it reported when it ran."""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from temporal_crashtest._history.load import (
    FAILS_BY_DESIGN,
    activity_attempts,
    timed_out_last,
    unexplained_activity_attempts,
    unexplained_task_timeouts,
)
from temporal_crashtest._history.tree import RunHistory, read_tree
from temporal_crashtest._history.waits import recovery_waits
from temporal_crashtest._points.sites import ROOT_SCOPE
from temporalio.api.enums.v1 import EventType, RetryState, TimeoutType
from temporalio.api.history.v1 import ActivityTaskTimedOutEventAttributes
from temporalio.client import WorkflowHistory

HISTORIES = Path(__file__).parent / "histories"
PRODUCTION_TASK_TIMEOUT_S = 10.0  # the notes app's; a fast cell ran with 1 s


def saved(name: str) -> tuple[RunHistory, list[str]]:
    """A saved cell: its run, and the timeouts the tool reported its recovery waited on."""
    record = json.loads((HISTORIES / f"{name}.json").read_text())
    history = WorkflowHistory.from_json(name, record["history"])
    started = history.events[0].workflow_execution_started_event_attributes
    run = RunHistory(
        scope=ROOT_SCOPE,
        workflow_id=name,
        run_id=started.original_execution_run_id,
        workflow_type=started.workflow_type.name,
        task_queue=started.task_queue.name,
        history=history,
    )
    return run, list(record["waited_on"])


def killed(run: RunHistory) -> set[str]:
    """The worker killed in the cell: the one that took the run's first workflow task (each
    saved cell started on the worker that was to die)."""
    first = next(
        e for e in run.history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
    )
    return {first.workflow_task_started_event_attributes.identity}


def labels(run: RunHistory) -> dict[int, str]:
    """Each ActivityTaskScheduled event's boundary label, as the report names it."""
    by_activity_id = {b.activity_id: b.label for b in read_tree([run]).boundaries}
    return {
        e.event_id: by_activity_id[e.activity_task_scheduled_event_attributes.activity_id]
        for e in run.history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }


def test_the_boundaries_are_named_from_the_history() -> None:
    run, _ = saved("notes-real-after-effect-1")
    tree = read_tree([run])
    assert [b.label for b in tree.boundaries] == ["write_note#1 (milk)", "write_note#2 (eggs)"]
    assert [b.number for b in tree.boundaries] == [1, 2]
    assert tree.untested == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # Waiting out the server: the heartbeat timeout, the retry policy's wait (the server's
        # default 1 s), then the dead worker's sticky queue.
        ("notes-real-after-effect-1",
         ["write_note#1 (milk) heartbeat timeout 2.0 s", "write_note#1 (milk) retry interval 1.0 s",
          "sticky queue timeout 1.0 s"]),
        # Fast-forwarded: the attempt was failed at once; the timeout it stands for is named,
        # and the retry's wait, which is not fast-forwarded.
        ("notes-fast-after-effect-1",
         ["write_note#1 (milk) heartbeat timeout 2.0 s",
          "write_note#1 (milk) retry interval 1.0 s"]),
        # Killed holding a workflow task: its timeout, at its production length.
        ("notes-real-after-checkpoint-1", ["workflow task start-to-close timeout 10.0 s"]),
        ("notes-fast-after-checkpoint-1", ["workflow task start-to-close timeout 10.0 s"]),
    ],
)  # fmt: skip
def test_recovery_waits_are_read_from_the_history(name: str, expected: list[str]) -> None:
    run, reported = saved(name)
    waits = [
        str(w) for w in recovery_waits(run, labels(run), PRODUCTION_TASK_TIMEOUT_S, killed(run))
    ]
    assert waits == expected
    # What the tool reported when it ran (before it named the retry's wait): the same, and for
    # a fast-forwarded kill after an effect the sticky queue wait it skipped (read from the
    # worker, not the history).
    timeouts = [w for w in waits if "retry interval" not in w]
    assert reported[: len(timeouts)] == timeouts


def test_only_a_task_production_would_not_end_is_unexplained() -> None:
    run, _ = saved("notes-fast-after-checkpoint-1")
    assert unexplained_task_timeouts([run], killed(run)) == 0
    assert unexplained_task_timeouts([run], set()) == 1  # had the worker lived: unexplained
    run, _ = saved("notes-fast-after-effect-1")
    assert unexplained_task_timeouts([run], killed(run)) == 0


def test_a_timeout_before_the_killed_workers_last_task_is_not_the_recoverys() -> None:
    """Named as killed, the worker that finished the run: every wait came before its last
    workflow task, so none is the recovery's."""
    run, _ = saved("notes-real-after-effect-1")
    last = [e for e in run.history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED][-1]  # fmt: skip
    finisher = {last.workflow_task_started_event_attributes.identity}
    assert recovery_waits(run, labels(run), PRODUCTION_TASK_TIMEOUT_S, finisher) == []


def test_a_task_attempt_the_history_does_not_record_is_unexplained() -> None:
    """A real cell from a loaded machine (the local-activity shape, unkeyed, three crash tests
    in parallel): under the 1 s timeout the killed worker's task timed out, and so did the next
    attempt, unrecorded (the server writes a retried task down only once one succeeds), before
    the kill; the local activity ran twice there, which production's 10 s would not have seen.
    Its first recorded retry is attempt 3: one more than the one kill explains, so the cell
    runs again with the production timeout."""
    run, _ = saved("local-fast-after-effect-1-unseen-timeout")
    assert unexplained_task_timeouts([run], killed(run)) == 1


@pytest.mark.parametrize("name", ["notes-fast-after-effect-1", "notes-real-after-effect-1"])
def test_an_attempt_no_kill_ended_is_unexplained(name: str) -> None:
    """write_note#1's first attempt ended with its worker's kill: its retry is explained (the
    kill came after it was scheduled); with no kill it would be an attempt a live worker lost
    (on a loaded machine), which repeats an unkeyed effect the crash did not cause."""
    run, _ = saved(name)
    scheduled = [e.event_time.ToDatetime() for e in run.history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]  # fmt: skip
    kill = scheduled[0] + timedelta(milliseconds=100)
    assert unexplained_activity_attempts([run], [kill]) == 0
    assert unexplained_activity_attempts([run], []) == 1
    before = scheduled[0] - timedelta(seconds=1)  # a kill before it was scheduled ends nothing
    assert unexplained_activity_attempts([run], [before]) == 1


def test_a_fast_forwarded_kill_explains_only_the_attempts_its_worker_held() -> None:
    """Fast-forwarded, each kill says which activities' attempts its worker held (and ended at
    once): write_note#1's retry is explained by a kill that held it, and by nothing else, even
    a kill between its scheduling and its retry's start. (Seen on a loaded machine: parallel
    charges whose first attempts timed out on the live worker, late heartbeats, waited out
    their retry's backoff when a kill came; the kill held none of them, yet explained both, and
    the cell's repeated charges were reported as the crash's.)"""
    run, _ = saved("notes-fast-after-effect-1")
    scheduled = [e for e in run.history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]  # fmt: skip
    first = (run.run_id, scheduled[0].activity_task_scheduled_event_attributes.activity_id)
    second = (run.run_id, scheduled[1].activity_task_scheduled_event_attributes.activity_id)
    kill = scheduled[0].event_time.ToDatetime() + timedelta(milliseconds=100)
    assert unexplained_activity_attempts([run], [kill], ended=Counter([first])) == 0
    assert unexplained_activity_attempts([run], [kill], ended=Counter()) == 1
    assert unexplained_activity_attempts([run], [kill], ended=Counter([second])) == 1
    assert unexplained_activity_attempts([run], [kill]) == 0  # with real timeouts: the window


def test_attempts_the_run_without_a_crash_took_are_by_design() -> None:
    """An activity that fails on purpose before it succeeds (a poll by retry) took as many
    attempts in the run without a crash: read from that run (`activity_attempts`), they are by
    design, not load's doing, with no kill to explain them."""
    run, _ = saved("notes-fast-after-effect-1")
    by_design = activity_attempts([run])
    assert sorted(by_design.values()) == [1, 2]  # write_note#1 took 2 attempts, #2 took 1
    assert unexplained_activity_attempts([run], [], by_design) == 0
    fewer = {where: 1 for where in by_design}  # had the reference taken one attempt each
    assert unexplained_activity_attempts([run], [], fewer) == 1


def test_a_killed_workers_task_that_timed_out_before_its_kill_is_unexplained() -> None:
    """A real cell from a loaded machine (the local-activity shape, unkeyed, after-checkpoint:1):
    the worker to be killed outran the 1 s timeout with the task that ran the local activity,
    took the next attempt itself, ran the local activity again and was killed after that: a
    second charge production's 10 s would not have made. The timed-out task was the killed
    worker's, but it lived on after it, so the timeout was not the kill's."""
    run, _ = saved("local-fast-after-checkpoint-1-outran")
    assert unexplained_task_timeouts([run], killed(run)) == 1
    # An after-checkpoint kill whose held task times out is explained, as before.
    clean, _ = saved("notes-fast-after-checkpoint-1")
    assert unexplained_task_timeouts([clean], killed(clean)) == 0


def _last_attempt_timed_out(run: RunHistory) -> RunHistory:
    """`run`, with its last activity's completion turned into the end its own start-to-close
    timeout gives when no retry follows (as a loaded worker's late answer meets it)."""
    history = WorkflowHistory(run.workflow_id, [copy.deepcopy(e) for e in run.history.events])
    done = [e for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED][-1]  # fmt: skip
    completed = done.activity_task_completed_event_attributes
    timed_out = ActivityTaskTimedOutEventAttributes(
        scheduled_event_id=completed.scheduled_event_id,
        started_event_id=completed.started_event_id,
        retry_state=RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED,
    )
    timed_out.failure.timeout_failure_info.timeout_type = TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE
    done.event_type = EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT
    done.activity_task_timed_out_event_attributes.CopyFrom(timed_out)
    return replace(run, history=history)


def test_a_last_attempt_its_own_timeout_ended_is_unexplained() -> None:
    """An attempt that timed out with no retry after it shows in no attempt number: write_note#2,
    had its one attempt's answer come past its start-to-close on a live worker, ended one
    attempt that no kill ended (a kill that held it explains it; so does a run without a crash
    that timed out the same way); for one that fails until its window closes, whose attempts
    are any number, the timeout alone is news. (Seen on a loaded machine: Temporal's saga
    sample's bank account, whose last failure came late, failed the run with a TimeoutError.)"""
    run, _ = saved("notes-fast-after-effect-1")
    by_design = activity_attempts([run])
    late = _last_attempt_timed_out(run)
    second = [e for e in run.history.events
              if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED][1]  # fmt: skip
    activity_id = second.activity_task_scheduled_event_attributes.activity_id
    assert list(timed_out_last([late])) == [(ROOT_SCOPE, activity_id)]
    assert unexplained_activity_attempts([late], [], by_design) == 1
    assert (
        unexplained_activity_attempts([late], [], by_design, Counter([(run.run_id, activity_id)]))
        == 0
    )
    assert unexplained_activity_attempts([late], [], by_design, None, timed_out_last([late])) == 0
    any_number = {where: FAILS_BY_DESIGN for where in by_design}
    assert unexplained_activity_attempts([late], [], any_number) == 1
    assert unexplained_activity_attempts([run], [], any_number) == 0
    # With real timeouts: a kill between its scheduling and its timeout, and one after it.
    ((_, ended_at),) = timed_out_last([late]).items()
    scheduled_at = second.event_time.ToDatetime()
    kill = scheduled_at + (ended_at - scheduled_at) / 2
    assert unexplained_activity_attempts([late], [kill], by_design) == 0
    assert unexplained_activity_attempts([late], [ended_at + timedelta(seconds=1)], by_design) == 1
