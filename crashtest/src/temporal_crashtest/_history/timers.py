"""The waits of a run without a crash: the timer (a `workflow.sleep`, a `wait_condition`
timeout) that fired before a boundary was scheduled, with nothing in flight while it ran: where
the `wait` moment kills a worker — in any run of the root's chain (a child's waits are not
tested: its parent's run does not wait, it has a child in flight)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from temporal_crashtest._history.tree import Boundary, RunHistory, Tree
from temporal_crashtest._points.sites import in_the_root_chain

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

# A wait cell that must pass earlier timers skips its chain's clock up to this much short of
# where the run without a crash started the timer it waits on: a run a little slower than that
# one waits this long at most, in real time, on a timer before it; a faster one starts its timer
# before the clock stops, and waits the rest of it in real time.
SKIP_SHORT_BY = timedelta(seconds=1)


@dataclass(frozen=True)
class TimerWait:
    """A timer the run waited on before a boundary: its id in the run (the same in every run of
    the same code) and how long it was set for."""

    timer_id: str
    span: timedelta
    # With a timer before it in the chain: how far the chain's clock is skipped, from its start,
    # before the cell stops skipping and the run goes on to this timer in real time (None: no
    # timer on the way, the run is started without skipping).
    skip_until: timedelta | None = None


def timer_before(tree: Tree, b: Boundary) -> TimerWait | None:
    """The timer that fired in `b`'s run after the boundary before it was scheduled and before
    `b` was, started while no activity of the run was in flight, of SHORTEST_WAIT or longer (the
    last, if several), in a run of the root's chain; None if the run did not wait there."""
    run = tree.run(b.scope)
    if run is None or b.local or not in_the_root_chain(b.scope):
        return None
    since = max(
        (o.reset_event_id for o in tree.boundaries
         if o.scope == b.scope and o.reset_event_id < b.reset_event_id),
        default=0,
    )  # fmt: skip
    in_flight = 0
    started: dict[str, HistoryEvent] = {}
    found: HistoryEvent | None = None
    for e in run.history.events:
        if e.event_id >= b.reset_event_id:
            break
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            in_flight += 1
        elif e.event_type in ACTIVITY_CLOSED:
            in_flight -= 1
        elif e.event_type == EventType.EVENT_TYPE_TIMER_STARTED and e.event_id > since:
            attrs = e.timer_started_event_attributes
            if in_flight == 0 and attrs.start_to_fire_timeout.ToTimedelta() >= SHORTEST_WAIT:
                started[attrs.timer_id] = e
        elif e.event_type == EventType.EVENT_TYPE_TIMER_FIRED:
            found = started.get(e.timer_fired_event_attributes.timer_id, found)
    if found is None:
        return None
    attrs = found.timer_started_event_attributes
    return TimerWait(
        attrs.timer_id, attrs.start_to_fire_timeout.ToTimedelta(), _skip_until(tree, run, found)
    )


def _skip_until(tree: Tree, run: RunHistory, timer: HistoryEvent) -> timedelta | None:
    """How far a wait cell skips its chain's clock on the way to `timer` of `run`: to
    SKIP_SHORT_BY before the run without a crash started it, from the chain's start; None when
    no timer of the chain started before it, or that point is the chain's first second
    (nothing to skip)."""
    chain = [r for r in tree.runs if in_the_root_chain(r.scope)]
    before = chain[: next(i for i, r in enumerate(chain) if r is run)]
    earlier = [e for e in run.history.events if e.event_id < timer.event_id] + [
        e for r in before for e in r.history.events
    ]
    if not any(e.event_type == EventType.EVENT_TYPE_TIMER_STARTED for e in earlier):
        return None
    began = chain[0].history.events[0].event_time.ToDatetime()
    until = timer.event_time.ToDatetime() - began - SKIP_SHORT_BY
    return until if until > timedelta() else None
