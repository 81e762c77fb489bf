"""What follows a kill: recording it (`Kill`), fast-forwarding what the server would otherwise
wait out (`after_the_kill`, `end_lost_attempts`; see `_fastforward`), and what the recovery
waited on in production, read from the crashed run's history (`read_waits`)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from temporal_crashtest._history.load import (
    ActivityOf,
    activity_attempts,
    timed_out_last,
    unexplained_activity_attempts,
    unexplained_task_timeouts,
)
from temporal_crashtest._history.tree import Boundary, RunHistory, Tree
from temporal_crashtest._history.waits import Wait, recovery_waits
from temporal_crashtest._plan.reference import CellPoint, Reference
from temporal_crashtest._run.recovery.fastforward import end_held, fast_forward
from temporal_crashtest._run.recovery.polling import Going
from temporal_crashtest._run.workers import Worker
from temporal_crashtest._worker.interceptor import Attempt

DEFAULT_TASK_TIMEOUT_S = 10.0  # the server's, for a run started without one
# An attempt the server says the live worker started, and that the worker has not said it
# received for this long, was lost on the way (its poll's answer).
LOST_AFTER_S = 10.0


@dataclass(frozen=True, kw_only=True)
class Kill:
    """One worker killed at its point: who, when, what it held, what was fast-forwarded."""

    identity: str
    at: datetime  # when its death was seen (UTC, naive: as the history's times are read)
    seen_at: float  # the same, on the monotonic clock
    in_flight: tuple[str, ...]  # "scope:position" of the boundaries it held; "NAME (held)"
    held: frozenset[ActivityOf] = frozenset()  # the activities whose attempts it held (fast)
    sticky_s: float | None  # its sticky queue's schedule-to-start timeout
    fast_forward: tuple[str, ...]  # what was ended at once rather than waited out


async def after_the_kill(
    client: Client, handle: WorkflowHandle[Any, Any], killed: Worker, point: CellPoint, fast: bool
) -> Kill:
    """The kill of `killed` at `point`, and (`fast`) what the server would wait out after it,
    fast-forwarded."""
    await killed.cut_off()  # on the wire: its polls gone before anything is handed out again
    killed.status.drain()  # what it wrote before it died is all there
    crash = killed.status.crash or {}
    facts = killed.status.facts
    identity = str(facts.get("identity"))
    in_flight = [f"{r['scope']}:{r['position']}" for r in crash.get("in_flight", [])]
    done: list[str] = []
    held: frozenset[ActivityOf] = frozenset()
    if fast:
        attempts = [Attempt(**a) for a in crash.get("attempts", [])]
        dying = crash.get("killed")  # on the wire: the attempt whose end the kill dropped
        forward = await fast_forward(
            client,
            handle,
            attempts,
            point.crash_at,
            str(facts.get("identity") or "") or None,
            (dying["workflow_id"], dying["run_id"], dying["activity_id"]) if dying else None,
        )
        done = forward.done
        in_flight += [f"{name} (held)" for name in forward.also_held]
        held = forward.held | {(a.run_id, a.activity_id) for a in attempts}
    return Kill(
        identity=identity,
        at=datetime.now(UTC).replace(tzinfo=None),
        seen_at=time.monotonic(),
        in_flight=tuple(in_flight),
        held=held,
        sticky_s=facts.get("sticky_s"),
        fast_forward=tuple(done),
    )


@dataclass(frozen=True)
class Lost:
    """The attempts lost with a dead worker, or on the way to the live one, that were ended at
    once: in words, for the report, and whose they were."""

    said: tuple[str, ...] = ()
    ended: tuple[ActivityOf, ...] = ()


async def end_lost_attempts(
    client: Client, progress: Going, worker: Worker, killed: frozenset[str]
) -> Lost:
    """End at once, to be retried, the attempts the server says were started where they will
    never end: by a killed worker (handed to a poll it had out when it died), or by the live
    worker, which never said it received them (a poll's answer lost on a loaded machine).
    Production waits out their timeouts; the run's effects are the same either way."""
    identity = worker.status.facts.get("identity")
    worker.status.drain()
    lost = []
    for held in progress.started:
        pending = held[2]
        if pending.last_worker_identity in killed:
            lost.append((held, "handed to a poll of the killed worker"))
        elif pending.last_worker_identity == identity and identity:
            age = datetime.now(UTC) - pending.last_started_time.ToDatetime(tzinfo=UTC)
            received = (held[0], pending.activity_id, pending.attempt) in worker.status.started
            if not received and age.total_seconds() > LOST_AFTER_S:
                lost.append((held, "started by the live worker, which never received it"))
    ended = await asyncio.gather(*(end_held(client, *h, why) for h, why in lost))
    done = [(held, why) for (held, why), ok in zip(lost, ended, strict=True) if ok]
    return Lost(
        tuple(
            f"{held[2].activity_type.name} attempt {held[2].attempt} ({why}) ended at once, as "
            "its timeout would"
            for held, why in done
        ),
        tuple((held[1], held[2].activity_id) for held, _ in done),
    )


@dataclass(frozen=True)
class Recovery:
    """What a crashed run's recovery waited on in production, and how many activity attempts
    and workflow tasks ended that no kill ended (a loaded machine's doing)."""

    waited_on: tuple[str, ...] = ()
    unexplained: int = 0


def read_waits(
    tree: Tree,
    kills: list[Kill],
    point: CellPoint | None,
    reference: Reference | None,
    short: timedelta | None,
    fast: bool,
    lost: Sequence[ActivityOf] = (),
    overran: int = 0,
) -> Recovery:
    """The recovery of the crashed run `tree` (a group's run, `point` None: only whether
    anything happened that no kill explains; `lost`: the attempts ended at once as lost;
    `overran`: the attempts a timeout ended while a live worker still ran them)."""
    killed = {k.identity for k in kills}
    by_design = activity_attempts(reference.tree.runs) if reference else None
    # Fast-forwarded, a kill is known to have ended only the attempts its worker held.
    ended = Counter([*(a for k in kills for a in k.held), *lost]) if fast else None
    timed_out = timed_out_last(reference.tree.runs) if reference else {}
    unexplained = unexplained_activity_attempts(
        tree.runs, [k.at for k in kills], by_design, ended, timed_out
    )
    unexplained += max(0, overran - len(reference.overran if reference else ()))
    if short is not None:
        unexplained += unexplained_task_timeouts(tree.runs, killed)
    crashed = tree.run(point.boundary.scope) if point else None
    if point is None or crashed is None:
        return Recovery(unexplained=unexplained)
    known = reference.boundaries if reference else []
    named = {(b.scope, b.position): b.label for b in known}
    by_event = {}  # scheduled event id -> the label the reference gave that boundary
    for b in tree.boundaries:
        if b.scope == point.boundary.scope and not b.local:
            for event_id in _scheduled_ids(crashed, b):
                by_event[event_id] = named.get((b.scope, b.position), b.label)
    production = None
    if short is not None:
        same = reference.tree.run(point.boundary.scope) if reference else None
        attrs = (same or crashed).history.events[0].workflow_execution_started_event_attributes
        production = attrs.workflow_task_timeout.ToTimedelta().total_seconds()
        if same is None:
            production = DEFAULT_TASK_TIMEOUT_S
    waits = [str(wait) for wait in recovery_waits(crashed, by_event, production, killed)]
    sticky_s = kills[0].sticky_s if kills else None
    if fast and not point.holds_a_task and sticky_s:
        # The next workflow task would have gone to the dead worker's sticky queue first.
        waits.append(str(Wait("", "sticky queue", sticky_s)))
    return Recovery(tuple(waits), unexplained)


def _scheduled_ids(crashed: RunHistory, b: Boundary) -> dict[int, str]:
    for e in crashed.history.events:
        if (
            e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_id == b.activity_id
        ):
            return {e.event_id: b.label}
    return {}
