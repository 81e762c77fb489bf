"""A run's timeline, for the HTML report: each activity of the run's tree as a bar on one time
axis (scheduled, the attempt that ended it started, closed), the kills, the workflow tasks that
failed or timed out (a retry), and the run's end; times in seconds from the run's start.

Temporal's history records only the attempt that ended an activity (its start event carries the
attempt number): earlier attempts show as the wait between scheduling and that start."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from temporal_crashtest._history.tree import ACTIVITY_CLOSINGS, RUN_ENDS, RunHistory
from temporal_crashtest._points.sites import STAMP_HEADER, decode_stamp

_TASK_TROUBLE = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED: "workflow task failed",
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT: "workflow task timed out",
}
# A run's end, for its timeline: a continue-as-new ends one run of the chain too.
_RUN_ENDS = RUN_ENDS | {EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW}


@dataclass(frozen=True, kw_only=True)
class Bar:
    label: str  # the activity type, with the run's scope below the root
    scheduled: float
    started: float | None  # the attempt that ended it (None: never started)
    closed: float | None  # None: still open at the run's end
    attempt: int  # that attempt's number
    outcome: str  # completed | failed | timed out | cancelled | open (`_history`'s words)


@dataclass(frozen=True, kw_only=True)
class Mark:
    at: float
    what: str  # "killed", "workflow task timed out", "run ended", ...


@dataclass(frozen=True, kw_only=True)
class Timeline:
    workflow_id: str
    run_id: str  # the first run's: the web UI's link
    length: float  # seconds from the run's start to its last event
    bars: list[Bar] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Timeline:
        return cls(
            workflow_id=data["workflow_id"],
            run_id=data["run_id"],
            length=data["length"],
            bars=[Bar(**b) for b in data["bars"]],
            marks=[Mark(**m) for m in data["marks"]],
        )


def _time(event: HistoryEvent) -> datetime:
    return event.event_time.ToDatetime(tzinfo=UTC)


def timeline_of(
    runs: Sequence[RunHistory],
    kills: Sequence[datetime] = (),
    labels: Mapping[str, str] | None = None,
) -> Timeline | None:
    """The timeline of a run's tree (`runs`, the root's first run first) and the kills (UTC);
    each bar named by its boundary's label in `labels` ("scope:position" -> label), found from
    the stamp crashtest's interceptor put on it, else by its activity type."""
    if not runs or not runs[0].history.events:
        return None
    start = _time(runs[0].history.events[0])

    def at(when: datetime) -> float:
        return round((when - start).total_seconds(), 3)

    bars: list[Bar] = []
    marks: list[Mark] = []
    last = start
    for run in runs:
        scope = "" if run is runs[0] else f"{run.workflow_type} "
        read = _RunReader(scope, run is runs[0], labels or {}, at)
        for event in run.history.events:
            read.event(event)
        bars += read.bars + read.still_open()
        marks += read.marks
        last = max(last, read.last)
    marks += [Mark(at=at(kill.replace(tzinfo=UTC)), what="worker killed") for kill in kills]
    bars.sort(key=lambda b: b.scheduled)
    marks.sort(key=lambda m: m.at)
    return Timeline(
        workflow_id=runs[0].workflow_id,
        run_id=runs[0].run_id,
        length=max([at(last), *(m.at for m in marks)]),
        bars=bars,
        marks=marks,
    )


# The attributes of each event that closes an activity.
_CLOSED_ATTRIBUTES = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "activity_task_canceled_event_attributes",
}


class _RunReader:
    """One run's history read into bars (its activities) and marks (its workflow tasks' trouble
    and, for the root's first run, its end), in seconds from the tree's start (`at`)."""

    def __init__(
        self,
        scope: str,
        root: bool,
        labels: Mapping[str, str],
        at: Callable[[datetime], float],
    ) -> None:
        self.scope, self.root, self.labels, self.at = scope, root, labels, at
        self.scheduled: dict[int, tuple[str, datetime]] = {}
        self.started: dict[int, tuple[datetime, int]] = {}
        self.bars: list[Bar] = []
        self.marks: list[Mark] = []
        self.last = datetime.min.replace(tzinfo=UTC)

    def event(self, event: HistoryEvent) -> None:
        when = _time(event)
        self.last = max(self.last, when)
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            asked = event.activity_task_scheduled_event_attributes
            stamp = decode_stamp(asked.header.fields.get(STAMP_HEADER))
            name = self.scope + asked.activity_type.name
            if stamp is not None:
                name = self.labels.get(f"{stamp.scope}:{stamp.position}", name)
            self.scheduled[event.event_id] = (name, when)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = event.activity_task_started_event_attributes
            self.started[attrs.scheduled_event_id] = (when, attrs.attempt)
        elif kind in ACTIVITY_CLOSINGS:
            attrs = getattr(event, _CLOSED_ATTRIBUTES[kind])
            label, since = self.scheduled.pop(attrs.scheduled_event_id, ("?", when))
            began = self.started.pop(attrs.scheduled_event_id, None)
            self.bars.append(self._bar(label, since, began, when, ACTIVITY_CLOSINGS[kind]))
        elif kind in _TASK_TROUBLE:
            self.marks.append(Mark(at=self.at(when), what=self.scope + _TASK_TROUBLE[kind]))
        elif kind in _RUN_ENDS and self.root:
            self.marks.append(Mark(at=self.at(when), what="run ended"))

    def still_open(self) -> list[Bar]:
        """A bar for each activity scheduled and not closed by the history's end."""
        return [
            self._bar(label, since, self.started.get(event_id), None, "open")
            for event_id, (label, since) in self.scheduled.items()
        ]

    def _bar(
        self,
        label: str,
        since: datetime,
        began: tuple[datetime, int] | None,
        closed: datetime | None,
        outcome: str,
    ) -> Bar:
        return Bar(
            label=label,
            scheduled=self.at(since),
            started=self.at(began[0]) if began else None,
            closed=None if closed is None else self.at(closed),
            attempt=began[1] if began else 1,
            outcome=outcome,
        )
