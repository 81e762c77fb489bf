"""Runs blocked by a deploy, never silent.

A version of the workflow whose code no longer replays a run's history (a step inserted,
removed or reordered without `workflow.patched`) does not fail the run: its workflow task fails
with a nondeterminism error and is retried at growing intervals, the run stays Running, and the
SDK says so in one WARN line of its core. Here:

- `report_blocked_runs`: the worker logs one ERROR line per blocked run (its workflow id, looked
  up by the run id the SDK gives, the run, the error, which names the step, and what to do) and
  counts it (`grocery_blocked_runs`);
- `why_blocked`: what a run's history says, for `starter.py` waiting on a run;
- `blocked_runs`: every Running run whose workflow task keeps failing with a nondeterminism
  error (`python -m infra blocked`): each Running run whose pending workflow task is past its
  first attempt, or that Temporal marked with its `TemporalReportedProblems` search attribute
  (set only after a few failures, about a minute), and whose history shows the error.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the worker and the starter, which have the SDK already
    from temporalio.client import Client, WorkflowExecution, WorkflowHistory
    from temporalio.common import MetricMeter

SDK_WORKFLOW_LOGGER = "temporalio.worker._workflow"
EVICTING = "Evicting workflow with run ID"  # the SDK's DEBUG record: (run id, message)
NONDETERMINISM = "[TMPRL1100]"
WHAT_TO_DO = (
    "it stays Running, its workflow task retried at growing intervals: roll back to the version "
    "that started it, or ship the change behind workflow.patched (docs/deploys.md)"
)
RUNNING = "ExecutionStatus = 'Running'"
LOOKUP_TIMEOUT_S = 5.0  # for the blocked run's workflow id, before the line goes without it
_INNER = re.compile(r'message: "((?:[^"\\]|\\.)*)"')


def core_message(text: str) -> str:
    """The failure's own message inside the SDK core's rendering of it."""
    inner = _INNER.search(text)
    return inner.group(1).replace('\\"', '"') if inner else text


class BlockedRunReporter(logging.Handler):
    """One ERROR line on `log`, and one count, per run whose workflow task fails with a
    nondeterminism error on this worker; what the SDK's logger passed on before (records at
    `passed_level` or above) still reaches its ancestors' handlers."""

    def __init__(
        self,
        log: logging.Logger,
        passed_level: int,
        meter: MetricMeter | None,
        client: Client | None = None,
    ) -> None:
        super().__init__(level=logging.DEBUG)
        self.log = log
        self.passed_level = passed_level
        self.client = client  # to look up a blocked run's workflow id (the SDK gives its run id)
        self.told: set[str] = set()
        self.saying: set[asyncio.Task[None]] = set()
        self.counter = (
            meter.create_counter(
                "grocery_blocked_runs", "runs whose code no longer replays on this worker"
            )
            if meter is not None
            else None
        )

    def emit(self, record: logging.LogRecord) -> None:
        try:
            args = record.args
            if (
                isinstance(record.msg, str)
                and record.msg.startswith(EVICTING)
                and isinstance(args, tuple)
                and len(args) == 2
                and NONDETERMINISM in str(args[1])
                and str(args[0]) not in self.told
            ):
                run_id = str(args[0])
                self.told.add(run_id)
                if self.counter is not None:
                    self.counter.add(1)
                self._say(run_id, core_message(str(args[1])))
            if record.levelno >= self.passed_level:
                logging.getLogger(SDK_WORKFLOW_LOGGER).parent.handle(record)  # type: ignore[union-attr]
        except Exception:  # a log line must never break the worker
            self.handleError(record)

    def _say(self, run_id: str, why: str) -> None:
        """The ERROR line: with the run's workflow id once looked up, on the worker's loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or self.client is None:
            self._line(None, run_id, why)
            return
        task = loop.create_task(self._look_up_and_say(self.client, run_id, why))
        self.saying.add(task)
        task.add_done_callback(self.saying.discard)

    async def _look_up_and_say(self, client: Client, run_id: str, why: str) -> None:
        workflow_id = None
        try:
            async with asyncio.timeout(LOOKUP_TIMEOUT_S):
                async for run in client.list_workflows(f"RunId = '{run_id}'", limit=1):
                    workflow_id = run.id
        except Exception:  # the line goes out without it
            pass
        self._line(workflow_id, run_id, why)

    def _line(self, workflow_id: str | None, run_id: str, why: str) -> None:
        named = f"{workflow_id} (run {run_id})" if workflow_id else f"run {run_id}"
        extra = {"workflow_run_id": run_id, "event": "run_blocked"}
        if workflow_id:
            extra["workflow_id"] = workflow_id
        self.log.error("%s is blocked by a deploy: %s; %s", named, why, WHAT_TO_DO, extra=extra)


def report_blocked_runs(
    log: logging.Logger, meter: MetricMeter | None = None, client: Client | None = None
) -> None:
    """Take the SDK workflow logger's records (its evictions are at DEBUG) through a
    BlockedRunReporter, which passes on the rest as the logger did."""
    sdk = logging.getLogger(SDK_WORKFLOW_LOGGER)
    sdk.addHandler(BlockedRunReporter(log, sdk.getEffectiveLevel(), meter, client))
    sdk.setLevel(logging.DEBUG)
    sdk.propagate = False


def why_blocked(history: WorkflowHistory) -> str | None:
    """The nondeterminism error the run's workflow task fails with since it last completed, if
    it does (Temporal writes the first failure of a streak)."""
    from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause

    nondeterministic = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR
    why = None
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            why = None
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            failed = event.workflow_task_failed_event_attributes
            if failed.cause == nondeterministic:
                why = failed.failure.message
    return why


@dataclass(frozen=True)
class BlockedRun:
    workflow_id: str
    run_id: str
    why: str  # the failure, or what Temporal reported when the history shows none


CHECKED_AT_ONCE = 16  # runs described (and their histories read) at once
PROGRESS_EVERY = 500  # runs checked between two progress lines


async def blocked_runs(
    client: Client, *, limit: int | None = None, progress: Callable[[int], None] | None = None
) -> AsyncIterator[BlockedRun]:
    """Every Running run a deploy blocked: its workflow task failing (past its first attempt, or
    reported by Temporal) with a nondeterminism error its history shows. Runs are checked
    CHECKED_AT_ONCE at a time, at most `limit` of them; `progress(checked)` every
    PROGRESS_EVERY."""
    batch: list[WorkflowExecution] = []
    checked = 0
    async for run in client.list_workflows(RUNNING, limit=limit):
        batch.append(run)
        if len(batch) < CHECKED_AT_ONCE:
            continue
        for found in await asyncio.gather(*(_blocked(client, r) for r in batch)):
            if found is not None:
                yield found
        if (
            progress is not None
            and (checked + len(batch)) // PROGRESS_EVERY > checked // PROGRESS_EVERY
        ):
            progress(checked + len(batch))
        checked, batch = checked + len(batch), []
    for found in await asyncio.gather(*(_blocked(client, r) for r in batch)):
        if found is not None:
            yield found


async def _blocked(client: Client, run: WorkflowExecution) -> BlockedRun | None:
    handle = client.get_workflow_handle(run.id, run_id=run.run_id)
    if not run.search_attributes.get("TemporalReportedProblems"):
        pending = (await handle.describe()).raw_description.pending_workflow_task
        if pending.attempt < 2:
            return None
    why = why_blocked(await handle.fetch_history())
    return None if why is None else BlockedRun(run.id, run.run_id, why)
