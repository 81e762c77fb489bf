"""The replay pass of a deploy test: before any worker is killed, where a run in flight would
meet a nondeterminism error on the new code, in milliseconds per boundary.

For every activity of the old version's run without a crash (the root's first run), its history
is cut just after the commands of the workflow task that scheduled it (a cut without them would
miss an error: the new code's commands are compared with those), and the cuts are replayed against
the new version's workflows (`Replayer`), the longest first and then by halving (a cut holds every
shorter one: `_first_blocked`), in a worker process of the new version
(`python -m temporal_crashtest.worker --replay FILE`: its factory builds the workers, whose
workflows, runners and converter the replayer takes). A replay never takes a new branch, so it
cannot show where keys land: the live cells still run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Interceptor, Replayer, Worker
from temporalio.worker import Plugin as WorkerPlugin

from temporal_crashtest._history.tree import Boundary, Tree
from temporal_crashtest._points.sites import ROOT_SCOPE
from temporal_crashtest._text import shown
from temporal_crashtest._worker.task_failures import core_failure, with_likely_cause

# Events a workflow task's commands write, right after its WorkflowTaskCompleted.
_COMMAND_EVENTS = frozenset(
    {
        EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED,
        EventType.EVENT_TYPE_MARKER_RECORDED,
        EventType.EVENT_TYPE_TIMER_STARTED,
        EventType.EVENT_TYPE_TIMER_CANCELED,
        EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
        EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
        EventType.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
        EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
        EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED,
    }
)


@dataclass(frozen=True)
class Replayed:
    """One cut on the new code: the boundary it ends at, the error (None: it replays), and how
    long its replay took (None: not replayed, its answer follows from its neighbours')."""

    label: str
    failure: str | None
    ms: float | None

    def to_json(self) -> dict[str, Any]:
        return {"activity": self.label, "failure": self.failure, "ms": self.ms}


def cuts(tree: Tree) -> list[tuple[Boundary, WorkflowHistory]]:
    """Each activity of the root's first run, with its run's history cut after the commands of
    the workflow task that scheduled it."""
    root = tree.run(ROOT_SCOPE)
    if root is None:
        return []
    events = list(root.history.events)
    found = []
    for b in tree.boundaries:
        if b.scope != ROOT_SCOPE or b.local:
            continue
        at = next((i for i, e in enumerate(events) if e.event_id == b.reset_event_id), None)
        if at is None:
            continue
        end = at + 1
        while end < len(events) and events[end].event_type in _COMMAND_EVENTS:
            end += 1
        found.append((b, WorkflowHistory(root.workflow_id, events[:end])))
    return found


def write_cuts(tree: Tree, path: Path) -> None:
    """The cuts, as JSON, for the worker process that replays them."""
    path.write_text(
        json.dumps(
            [
                {"label": b.label, "workflow_id": h.workflow_id, "history": h.to_json()}
                for b, h in cuts(tree)
            ]
        )
    )


def read_replayed(path: Path) -> list[Replayed]:
    return [Replayed(**row) for row in json.loads(path.read_text())]


def replay_file(source: str) -> tuple[list[dict[str, Any]], Path]:
    """The cuts a `--replay FILE` holds, and where to write what they gave (FILE.out)."""
    path = Path(source)
    return json.loads(path.read_text()), path.with_name(path.name + ".out")


def write_replayed(path: Path, results: list[Replayed]) -> None:
    path.write_text(json.dumps([r.__dict__ for r in results]))


async def replay_cuts(
    workers: list[Worker], client: Client, rows: list[dict[str, Any]]
) -> list[Replayed]:
    """In the new version's worker process: replay every cut (`replay_file`'s rows) against the
    workflows of `workers` (built by its factory, never run)."""
    config = workers[0].config()
    workflows = [w for each in workers for w in each.config().get("workflows", [])]
    common: dict[str, Any] = {
        "workflows": workflows,
        "interceptors": [i for i in config.get("interceptors", []) if isinstance(i, Interceptor)],
        "workflow_failure_exception_types": config.get("workflow_failure_exception_types", []),
        "debug_mode": config.get("debug_mode", False),
    }
    plugins = [p for p in client.config().get("plugins", []) if isinstance(p, WorkerPlugin)]
    if plugins:  # an agent framework's: it sets the converter, sandbox and runner up
        replayer = Replayer(**common, plugins=plugins)
    else:
        replayer = Replayer(
            **common,
            data_converter=client.data_converter,
            workflow_runner=config["workflow_runner"],
            unsandboxed_workflow_runner=config["unsandboxed_workflow_runner"],
        )

    async def replay(row: dict[str, Any]) -> Replayed:
        history = WorkflowHistory.from_json(row["workflow_id"], row["history"])
        started = time.perf_counter()
        done = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        failure = done.replay_failure
        return Replayed(
            label=row["label"],
            failure=with_likely_cause(core_failure(str(failure))) if failure else None,
            ms=round((time.perf_counter() - started) * 1000, 1),
        )

    return await _first_blocked(rows, replay)


async def _first_blocked(
    rows: list[dict[str, Any]], replay: Callable[[dict[str, Any]], Awaitable[Replayed]]
) -> list[Replayed]:
    """Each cut's answer from a binary search, not a replay of every cut: a cut holds every
    shorter one, so once one is blocked every longer one is, at the same place, and a cut that
    replays says every shorter one does. The longest first (most deploys replay clean: one
    replay), then halving: log2(cuts) replays in all, where every cut would cost the square."""
    if not rows:
        return []
    done: dict[int, Replayed] = {len(rows) - 1: await replay(rows[-1])}
    low, high = 0, len(rows) - 1  # the first blocked cut is in [low, high], if any is
    if done[high].failure is None:
        low = high + 1
    while low < high:
        middle = (low + high) // 2
        done[middle] = await replay(rows[middle])
        low, high = (low, middle) if done[middle].failure else (middle + 1, high)
    first = done.get(low)
    return [
        done.get(i)
        or Replayed(
            label=row["label"], failure=None if i < low or first is None else first.failure, ms=None
        )
        for i, row in enumerate(rows)
    ]


def summary(replayed: list[Replayed], deploy_to: str | None) -> str:
    """One line: how many cuts replayed on the new code, how fast, and where a run in flight
    would be blocked (every user string `shown`)."""
    timed = [r.ms for r in replayed if r.ms is not None]
    text = (
        f"replay pass (no kills): {len(replayed)} cut(s) of the old version's history on "
        f"{shown(deploy_to)}, {len(timed)} replayed in {sum(timed):.0f} ms"
    )
    blocked = [r for r in replayed if r.failure]
    if not blocked:
        return text + ": every one replays"
    first = blocked[0]
    return (
        f"{text}: {len(blocked)} would block a run in flight, the first once "
        f"{shown(first.label)} is scheduled: {shown(first.failure)}"
    )
