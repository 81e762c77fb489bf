"""What a workflow's histories tell a crash test, read from histories already fetched (no call to
the server: `_polling` asks it): every boundary of the run's tree (activities and local
activities, in child workflows and in every run of a continue-as-new chain), what a recovery
waited on (a SIGKILLed worker is noticed only through timeouts), and the attempts no kill can
have ended."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import (
    EventType,
)
from temporalio.api.history.v1 import (
    HistoryEvent,
)
from temporalio.client import WorkflowHistory

from temporal_crashtest._history.attempts import DEFAULT_BACKOFF
from temporal_crashtest._points.points import Untested
from temporal_crashtest._points.sites import STAMP_HEADER, decode_stamp, in_the_root_chain

LOCAL_ACTIVITY_MARKER = "core_local_activity"
UNSEEN_REQUEST = (
    "an HTTP request sent through a library crashtest does not watch (not httpx, aiohttp, "
    "urllib3, requests or http.client): no crash point follows it; send it through one of "
    "those, or call temporal_crashtest.effect once it is answered"
)
INPUT_CHARS = 24


# How an attempt ended on its worker (a boundary's `ends`).
RETURNED, LATER_SEEN, LATER_UNSEEN = "returned", "completed later", "completed later, unseen"
# How an activity ended in its run (a boundary's `closed`).
COMPLETED, FAILED, TIMED_OUT, CANCELLED, OPEN = (
    "completed", "failed", "timed out", "cancelled", "still running"
)  # fmt: skip


@dataclass(kw_only=True, frozen=True)
class RunHistory:
    """One run of one workflow of the tree, and its place in it."""

    scope: str
    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    history: WorkflowHistory
    # Its activities carry crashtest's stamps (its workers are crashtest's Python processes);
    # False: workers of any SDK, killed on the wire, their activities numbered from the history.
    stamped: bool = True


@dataclass(frozen=True, kw_only=True)
class Boundary:
    """An activity or local activity of the tree: a place a killed worker can repeat an effect."""

    number: int  # 1-based, across the whole tree in scheduling order
    scope: str  # the run it belongs to (see _interceptor)
    position: int  # 1-based, within its run
    activity: str  # the activity type, as the history spells it
    local: bool
    label: str  # how the report names it: "run 2: notify", "ChargeChild/charge (local)"
    occurrence: int  # which `activity` of the tree it is, in scheduling order (for `name#k`)
    activity_id: str
    workflow_id: str  # its run, for a reset
    run_id: str
    reset_event_id: int  # the workflow task that scheduled it (a reset goes back to there)
    scheduled: datetime = datetime.min  # when that task's commands were recorded
    ended: datetime = datetime.min  # when its last attempt ended (a local one: its marker)
    taken: datetime = datetime.min  # when the workflow task that took its result started
    closed: str = COMPLETED  # how it ended in its run: completed, failed, timed out, ...
    input: str = ""  # a hint of its input (`short_input`)
    input_digest: str = ""  # of its whole input as scheduled: equal inputs, equal digests
    retry_s: float = 0.0  # its retry policy's first wait (a local activity's: 0, unread)
    effects: tuple[str, ...] = ()  # the effects its attempt said it made (`_effects`), in order
    # How its last attempt ended on the worker: RETURNED, or completed later by a client the
    # worker's (LATER_SEEN) or another (LATER_UNSEEN), after `activity.raise_complete_async()`.
    ends: str = "returned"


@dataclass(frozen=True)
class Tree:
    """The boundaries of a tree's runs, what could not be made one, and what the user should know
    (e.g. activity ids that repeat across a continue-as-new chain)."""

    runs: list[RunHistory]
    boundaries: list[Boundary] = field(default_factory=list)
    untested: list[Untested] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def run(self, scope: str) -> RunHistory | None:
        return next((r for r in self.runs if r.scope == scope), None)

    def span(self) -> timedelta:
        """The workflow time its runs covered, first event to last (time skipping makes it more
        than the wall clock's)."""
        times = [e.event_time.ToDatetime() for r in self.runs for e in r.history.events]
        return max(times) - min(times) if times else timedelta()

    def with_warning(self, warning: str) -> Tree:
        return replace(self, warnings=[*self.warnings, warning])

    def with_effects(self, said: list[dict[str, Any]]) -> Tree:
        """The tree with each boundary's effects, as its workers said them (`_effects`): those
        of its last attempt that said any (the one that returned)."""
        by_attempt: dict[tuple[str, int], dict[int, list[str]]] = {}
        for e in said:
            where = (str(e.get("scope")), int(e.get("position") or 0))
            attempts = by_attempt.setdefault(where, {})
            attempts.setdefault(int(e.get("attempt") or 0), []).append(str(e.get("what")))
        boundaries = []
        for b in self.boundaries:
            attempts = by_attempt.get((b.scope, b.position), {})
            last = attempts[max(attempts)] if attempts else []
            boundaries.append(replace(b, effects=tuple(last)))
        return replace(self, boundaries=boundaries)

    def with_completions(self, said: list[dict[str, Any]]) -> Tree:
        """The tree with how each boundary's last attempt ended on its worker: returned, or
        handed to be completed later by a client, which the worker's client did (seen) or not
        (another process's)."""
        handed: dict[tuple[str, int], dict[int, bool]] = {}
        for e in said:
            where = (str(e.get("scope")), int(e.get("position") or 0))
            attempts = handed.setdefault(where, {})
            attempt = int(e.get("attempt") or 0)
            attempts[attempt] = attempts.get(attempt, False) or bool(e.get("seen"))
        boundaries = []
        for b in self.boundaries:
            attempts = handed.get((b.scope, b.position), {})
            if attempts:
                seen = attempts[max(attempts)]
                b = replace(b, ends=LATER_SEEN if seen else LATER_UNSEEN)
            boundaries.append(b)
        return replace(self, boundaries=boundaries)

    def with_unseen(self, unseen: list[dict[str, Any]]) -> Tree:
        """The tree with what its activities sent that no crash point can follow (`_http`'s
        unseen requests) among what is not tested, once per boundary and request."""
        labels = {(b.scope, b.position): b.label for b in self.boundaries}
        found: Counter[tuple[str, str]] = Counter()
        for e in unseen:
            where = (str(e.get("scope")), int(e.get("position") or 0))
            found[(labels.get(where, f"activity {where[1]}"), str(e.get("what")))] += 1
        rows = [
            Untested(f"{label}: {what}" + (f" (x{n})" if n > 1 else ""), UNSEEN_REQUEST)
            for (label, what), n in found.items()
        ]
        return replace(self, untested=[*self.untested, *rows])

    def only_ends_after(self, b: Boundary) -> bool:
        """Whether, after `b`'s completion, the run without a crash only ended: the root's last
        run closed in the very workflow task that took the result (no timer, message, child or
        later task between). Otherwise a kill there is a crash point like any other: the run
        still had work to do."""
        run = self.run(b.scope)
        chain = [r for r in self.runs if in_the_root_chain(r.scope)]  # in order
        if run is None or b.local or not chain or run is not chain[-1]:
            return False
        events = list(run.history.events)
        scheduled = next(
            (
                e.event_id
                for e in events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and e.activity_task_scheduled_event_attributes.activity_id == b.activity_id
            ),
            None,
        )
        ended = next((i for i, e in enumerate(events) if _closes_activity(e) == scheduled), None)
        if scheduled is None or ended is None:
            return False
        after = [e.event_type for e in events[ended + 1 :]]
        task = [
            EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
            EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
            EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
        ]
        return after[:3] == task and len(after) == 4 and after[3] in RUN_ENDS


# The events that close a run for good (a continue-as-new goes on in the next run).
RUN_ENDS = frozenset({
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
})  # fmt: skip


ACTIVITY_CLOSINGS = {  # an activity's closing event, and its outcome in words
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: COMPLETED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: FAILED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: TIMED_OUT,
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: CANCELLED,
}


def _closes_activity(e: HistoryEvent) -> int | None:
    """The scheduled event id of the activity this event ends, if it ends one."""
    if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        return e.activity_task_completed_event_attributes.scheduled_event_id
    if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
        return e.activity_task_failed_event_attributes.scheduled_event_id
    if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
        return e.activity_task_timed_out_event_attributes.scheduled_event_id
    return None


@dataclass(kw_only=True)
class _Found:
    """A boundary as the history shows it, before it is numbered and named."""

    run: RunHistory
    position: int
    activity: str
    local: bool
    activity_id: str
    time: datetime
    reset_event_id: int
    input: str = ""
    strings: list[str] = field(default_factory=list)  # its input's strings (`input_strings`)
    input_digest: str = ""
    retry_s: float = 0.0
    ended: datetime = datetime.min
    taken: datetime = datetime.min
    closed: str = OPEN


def _strings(payloads: list[Payload]) -> tuple[list[str], list[str]]:
    """The strings of an activity's input (JSON), in order, and its other scalars."""
    if not payloads or payloads[0].metadata.get("encoding") != b"json/plain":
        return [], []
    try:
        value = json.loads(payloads[0].data)
    except ValueError:
        return [], []
    strings: list[str] = []
    others: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for inner in v.values():
                walk(inner)
        elif isinstance(v, list):
            for inner in v:
                walk(inner)
        elif isinstance(v, str):
            strings.append(v)
        elif v is not None and not isinstance(v, bool):
            others.append(str(v))

    walk(value)
    return strings, others


def _hint(strings: Sequence[str]) -> str:
    text = GENERATED.sub("…", " ".join(strings[:2]))
    return text if len(text) <= INPUT_CHARS else text[: INPUT_CHARS - 1] + "…"


def short_input(payloads: list[Payload]) -> str:
    """A hint of which call an activity is: its input's first strings (else its first numbers)."""
    strings, others = _strings(payloads)
    return _hint(strings or others)


def input_strings(payloads: list[Payload]) -> list[str]:
    """The input's non-empty strings, their whitespace made single spaces (its numbers if it has
    no strings): what `call_hints` compares."""
    strings, others = _strings(payloads)
    return [t for t in (" ".join(s.split()) for s in strings) if t] or others


# Values that differ between two runs of the same code, wherever they appear in a value: what
# `workflow.now()` and `workflow.uuid4()` give (a framework puts them inside its messages). Never
# in a label, which must be the same in every run (each shard makes its own reference; `merge`
# compares the labels); ignored where a deploy's inputs are compared (`_hazards`).
GENERATED = re.compile(
    r"\d{4}-\d\d-\d\d[T ][\d:.]+(Z|[+-]\d\d:?\d\d)?"
    r"|[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
)


def call_hints(calls: Sequence[Sequence[str]], run_ids: Sequence[str]) -> list[str]:
    """What tells apart the calls of one activity in one run whose first input strings do not
    (`calls`: each one's input strings, in scheduling order): for each call after the first, the
    strings the call before it did not have — what is new in it, a conversation's newest turn,
    not the system prompt every call repeats; text (a string with a space) before identifiers.
    Strings holding a run's id, or an id or time a run makes up (`GENERATED`), are never used:
    a label must be the same in every run. The first call gets no hint (what it holds that the
    others do not is the likeliest to be made up per run: a framework's marker)."""
    kept = [
        [GENERATED.sub("…", s) for s in call if not any(i in s for i in run_ids)] for call in calls
    ]
    hints = [""]  # the first: its input starts every later one's
    for before, strings in itertools.pairwise(kept):
        unmasked = [s for s in strings if s not in set(before) and "…" not in s]
        words = [s for s in unmasked if " " in s]  # a turn's text before a tool call's id
        hints.append(_hint(words or unmasked))
    return hints[: len(kept)]


def _found_in(run: RunHistory, untested: list[Untested], served: frozenset[str]) -> list[_Found]:
    """The run's boundaries by position: activities from their stamps, local activities from
    their markers, placed in the positions the stamps leave free (in the order they ran)."""
    activities: list[_Found] = []
    markers: dict[int, _Found] = {}
    by_scheduled: dict[int, _Found] = {}
    untaken: list[_Found] = []  # ended; the workflow task that takes the result not yet started
    for e in run.history.events:
        closed = _closes_activity(e)
        if closed is not None and closed in by_scheduled:
            by_scheduled[closed].ended = e.event_time.ToDatetime()
            untaken.append(by_scheduled[closed])
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
            cancelled = e.activity_task_canceled_event_attributes.scheduled_event_id
            if cancelled in by_scheduled:
                by_scheduled[cancelled].closed = CANCELLED
        elif closed is not None and closed in by_scheduled:
            by_scheduled[closed].closed = ACTIVITY_CLOSINGS[e.event_type]
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            for f in untaken:
                f.taken = e.event_time.ToDatetime()
            untaken = []
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            found = (_scheduled if run.stamped else _unstamped)(run, e, untested, served)
            if found is not None:
                activities.append(found)
                by_scheduled[e.event_id] = found
        elif (
            e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
            and e.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER
        ):
            marked = _local_activity(run, e, untested)
            if marked is not None and run.stamped:
                markers.setdefault(*marked)
            elif marked is not None:
                activities.append(marked[1])
    if not run.stamped:  # in the order the history records them
        for position, f in enumerate(activities, 1):
            f.position = position
        return activities
    return _with_locals_placed(run, activities, markers, untested)


def _scheduled(
    run: RunHistory, e: HistoryEvent, untested: list[Untested], served: frozenset[str]
) -> _Found | None:
    """The activity an ActivityTaskScheduled event schedules; None (and why, in `untested`) if
    crashtest's workers do not run it."""
    a = e.activity_task_scheduled_event_attributes
    stamp = decode_stamp(a.header.fields.get(STAMP_HEADER))
    name = a.activity_type.name
    if stamp is None:
        untested.append(
            Untested(
                f"{run.workflow_type} {name} (id {a.activity_id})",
                "scheduled without crashtest's stamp: its worker is not "
                "one of crashtest's (another task queue?)",
            )
        )
        return None
    if _unserved(run, e, untested, served):
        return None
    return _scheduled_found(run, e, stamp.position)


def _unserved(
    run: RunHistory, e: HistoryEvent, untested: list[Untested], served: frozenset[str]
) -> bool:
    """Whether the activity runs on a task queue crashtest's workers do not poll (and so why,
    in `untested`)."""
    a = e.activity_task_scheduled_event_attributes
    if a.task_queue.name == run.task_queue or a.task_queue.name in served:
        return False
    untested.append(
        Untested(
            f"{run.workflow_type} {a.activity_type.name}",
            f"runs on task queue {a.task_queue.name}, which crashtest's workers do not poll",
        )
    )
    return True


def _scheduled_found(run: RunHistory, e: HistoryEvent, position: int) -> _Found:
    a = e.activity_task_scheduled_event_attributes
    return _Found(
        run=run,
        position=position,
        activity=a.activity_type.name,
        local=False,
        activity_id=a.activity_id,
        time=e.event_time.ToDatetime(),
        reset_event_id=a.workflow_task_completed_event_id,
        input=short_input(list(a.input.payloads)),
        strings=input_strings(list(a.input.payloads)),
        input_digest=hashlib.sha256(a.input.SerializeToString(deterministic=True)).hexdigest(),
        retry_s=a.retry_policy.initial_interval.ToTimedelta().total_seconds()
        or DEFAULT_BACKOFF.total_seconds(),
    )


def _unstamped(
    run: RunHistory, e: HistoryEvent, untested: list[Untested], served: frozenset[str]
) -> _Found | None:
    """The activity an ActivityTaskScheduled event schedules, in a run whose workers are not
    crashtest's Python processes (a worker command of any SDK): no stamp to read, its position
    given in the order the history records the run's boundaries; None (and why) on a task queue
    the worker command does not poll."""
    return None if _unserved(run, e, untested, served) else _scheduled_found(run, e, 0)


def _local_activity(
    run: RunHistory, e: HistoryEvent, untested: list[Untested]
) -> tuple[int, _Found] | None:
    """The local activity a marker records, with its sequence number; None (and why, in
    `untested`) if the marker cannot be read. Its position is placed later."""
    m = e.marker_recorded_event_attributes
    try:
        data = json.loads(m.details["data"].payloads[0].data)
        seq = int(data["seq"])
    except (KeyError, IndexError, ValueError, TypeError):
        where = f"{run.workflow_type} local activity (event {e.event_id})"
        untested.append(Untested(where, "its marker cannot be read"))
        return None
    found = _Found(
        run=run,
        position=0,
        activity=str(data.get("activity_type", "?")),
        local=True,
        activity_id=str(data.get("activity_id", "")),
        time=e.event_time.ToDatetime(),
        reset_event_id=m.workflow_task_completed_event_id,
        ended=e.event_time.ToDatetime(),
        taken=e.event_time.ToDatetime(),
        closed=COMPLETED,  # its marker holds its result (or its failure)
    )
    return seq, found


def _with_locals_placed(
    run: RunHistory,
    activities: list[_Found],
    markers: dict[int, _Found],
    untested: list[Untested],
) -> list[_Found]:
    """All the run's boundaries by position: the local activities take the positions the
    stamped activities leave free, in the order they ran; if the counts disagree they are
    untested."""
    taken = {a.position for a in activities}
    free = [p for p in range(1, len(activities) + len(markers) + 1) if p not in taken]
    locals_ = [markers[seq] for seq in sorted(markers)]
    if len(free) != len(locals_):
        for la in locals_:
            untested.append(
                Untested(
                    f"{run.workflow_type} {la.activity} (local)",
                    "its position among the run's activities cannot be told from the history",
                )
            )
        locals_ = []
    for position, la in zip(free, locals_, strict=False):
        la.position = position
    return sorted([*activities, *locals_], key=lambda f: f.position)


def _segments(scope: str) -> list[tuple[str, int]]:
    """`@1/Child#2@1` → [("", 1), ("Child#2", 1)]."""
    out = []
    for part in scope.split("/"):
        name, _, run = part.rpartition("@")
        out.append((name, int(run)))
    return out


def scope_names(scopes: set[str]) -> dict[str, str]:
    """How each scope is named in a label: `run 2: ` for a later run of the root's chain, then
    `Child/` for each child (`Child#2` where a run starts more than one `Child`, `Child (run 2)`
    for a later run of a child's chain)."""
    runs: dict[tuple[tuple[tuple[str, int], ...], str], set[int]] = {}
    siblings: dict[tuple[tuple[tuple[str, int], ...], str], set[str]] = {}
    for scope in scopes:
        segments = _segments(scope)
        for i, (name, run) in enumerate(segments):
            parent = tuple(segments[:i])
            runs.setdefault((parent, name), set()).add(run)
            siblings.setdefault((parent, name.partition("#")[0]), set()).add(name)
    names = {}
    for scope in scopes:
        segments = _segments(scope)
        text = ""
        for i, (name, run) in enumerate(segments):
            parent = tuple(segments[:i])
            later_run = len(runs[(parent, name)]) > 1
            if i == 0:
                text = f"run {run}: " if later_run else ""
                continue
            workflow_type = name.partition("#")[0]
            shown = name if len(siblings[(parent, workflow_type)]) > 1 else workflow_type
            text += shown + (f" (run {run})" if later_run else "") + "/"
        names[scope] = text
    return names


def read_tree(runs: list[RunHistory], served: frozenset[str] = frozenset()) -> Tree:
    """Number and name every boundary of the runs; say what cannot be crashed, and warn where
    `workflow_id:activity_id` keys would collide. `served`: the task queues crashtest's workers
    poll besides each run's own (a factory that builds a Worker per queue)."""
    untested: list[Untested] = []
    boundaries: list[Boundary] = []
    found: list[_Found] = []
    for run in runs:
        found += _found_in(run, untested, served)
    ordered = _in_order(runs, found)
    names = scope_names({r.scope for r in runs})
    per_scope = Counter((f.run.scope, f.activity) for f in ordered)
    hints = _call_hints(runs, ordered)
    seen_in_scope: Counter[tuple[str, str]] = Counter()
    seen: Counter[str] = Counter()
    for number, f in enumerate(ordered, 1):
        key = (f.run.scope, f.activity)
        seen_in_scope[key] += 1
        seen[f.activity] += 1
        label = names[f.run.scope] + f.activity
        if per_scope[key] > 1:
            label += f"#{seen_in_scope[key]}"
            if hints.get(id(f)):
                label += f" ({hints[id(f)]})"
        if f.local:
            label += " (local)"
        boundaries.append(_boundary(f, number, label, seen[f.activity]))
    tree = Tree(runs, boundaries, untested)
    return replace(tree, warnings=_repeated_activity_ids(tree))


def _in_order(runs: list[RunHistory], found: list[_Found]) -> list[_Found]:
    """One order across the tree: each run's boundaries by position, runs interleaved by
    time."""
    keyed: list[tuple[datetime, int, int, _Found]] = []
    for index, run in enumerate(runs):
        latest = datetime.min
        for f in (f for f in found if f.run is run):
            latest = max(latest, f.time)
            keyed.append((latest, index, f.position, f))
    return [f for *_, f in sorted(keyed, key=lambda k: k[:3])]


def _call_hints(runs: list[RunHistory], ordered: list[_Found]) -> dict[int, str]:
    """By id(boundary): what tells apart the calls of one activity in one run: each call's
    first input strings, where they tell every call apart (`charge#2 (acme inv-2)`); else
    what is new in each (a conversation whose calls all start alike)."""
    calls: dict[tuple[str, str], list[_Found]] = {}
    for f in ordered:
        calls.setdefault((f.run.scope, f.activity), []).append(f)
    run_ids = sorted({r.workflow_id for r in runs} | {r.run_id for r in runs})
    hints: dict[int, str] = {}
    for same in calls.values():
        found_hints = [f.input for f in same]
        if len(set(found_hints)) < len(same) or not all(found_hints):
            found_hints = call_hints([f.strings for f in same], run_ids)
        if len(set(found_hints)) > 1:
            hints.update((id(f), h) for f, h in zip(same, found_hints, strict=True))
    return hints


def _boundary(f: _Found, number: int, label: str, occurrence: int) -> Boundary:
    return Boundary(
        number=number,
        scope=f.run.scope,
        position=f.position,
        activity=f.activity,
        local=f.local,
        label=label,
        occurrence=occurrence,
        activity_id=f.activity_id,
        workflow_id=f.run.workflow_id,
        run_id=f.run.run_id,
        reset_event_id=f.reset_event_id,
        scheduled=f.time,
        ended=f.ended,
        taken=f.taken,
        closed=f.closed,
        input=f.input,
        input_digest=f.input_digest,
        retry_s=f.retry_s,
    )


def _repeated_activity_ids(tree: Tree) -> list[str]:
    """Activity ids restart in every run of a continue-as-new chain: keys made of the workflow id
    and the activity id collide there."""
    warnings = []
    chains: dict[tuple[str, str], list[Boundary]] = {}
    for b in tree.boundaries:
        chains.setdefault((b.workflow_id, b.scope.rpartition("@")[0]), []).append(b)
    for (_, chain), boundaries in chains.items():
        by_id: dict[str, set[str]] = {}
        for b in boundaries:
            by_id.setdefault(b.activity_id, set()).add(b.scope)
        repeated = sorted((i for i, s in by_id.items() if len(s) > 1), key=lambda i: (len(i), i))
        if repeated:
            shown = ", ".join(repeated[:5]) + (" …" if len(repeated) > 5 else "")
            runs = len({b.scope for b in boundaries})
            where = f"the child {chain.rpartition('/')[2]}'s" if chain else "the workflow's"
            warnings.append(
                f"activity ids {shown} repeat across the {runs} runs of {where} continue-as-new "
                "chain: keys of workflow_id:activity_id collide there (put the run's place in "
                "the chain into the key)"
            )
    return warnings
