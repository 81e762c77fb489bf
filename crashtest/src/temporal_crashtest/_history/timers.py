"""The waits of a run without a crash: the timer (a `workflow.sleep`, a `wait_condition`
timeout) that fired before a boundary was scheduled, with nothing in flight while it ran: where
the `wait` moment kills a worker."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio.api.enums.v1 import EventType

from temporal_crashtest._history.tree import Boundary, Tree

ACTIVITY_CLOSED = frozenset(
    {
        EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
        EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
        EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
        EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
    }
)


# A timer shorter than this is no wait to kill in: crashtest reads the history every 50 ms to
# find the run waiting, and a 10 ms sleep has fired by then (the cell would not be reached).
SHORTEST_WAIT = timedelta(seconds=1)


@dataclass(frozen=True)
class TimerWait:
    """A timer the run waited on before a boundary: its id in the run (the same in every run of
    the same code) and how long it was set for."""

    timer_id: str
    span: timedelta


def timer_before(tree: Tree, b: Boundary) -> TimerWait | None:
    """The timer that fired in `b`'s run after the boundary before it was scheduled and before
    `b` was, started while no activity of the run was in flight, of SHORTEST_WAIT or longer (the
    last, if several); None if the run did not wait there."""
    run = tree.run(b.scope)
    if run is None or b.local:
        return None
    since = max(
        (o.reset_event_id for o in tree.boundaries
         if o.scope == b.scope and o.reset_event_id < b.reset_event_id),
        default=0,
    )  # fmt: skip
    in_flight = 0
    started: dict[str, timedelta] = {}
    found = None
    for e in run.history.events:
        if e.event_id >= b.reset_event_id:
            break
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            in_flight += 1
        elif e.event_type in ACTIVITY_CLOSED:
            in_flight -= 1
        elif e.event_type == EventType.EVENT_TYPE_TIMER_STARTED and e.event_id > since:
            attrs = e.timer_started_event_attributes
            span = attrs.start_to_fire_timeout.ToTimedelta()
            if in_flight == 0 and span >= SHORTEST_WAIT:
                started[attrs.timer_id] = span
        elif e.event_type == EventType.EVENT_TYPE_TIMER_FIRED:
            timer_id = e.timer_fired_event_attributes.timer_id
            if timer_id in started:
                found = TimerWait(timer_id, started[timer_id])
    return found
