"""What a worker of any SDK tells the crash test without saying a word: read off the wire, the
facts a crashtest Python worker writes on its status channel (`_status.WorkerStatus`), kept in
the same fields — built (its first poll), polling, its identity, task queues and sticky queue's
timeout (its polls' and its workflow tasks' fields), each activity attempt it received, each
attempt it received while an earlier one of the same activity still ran on it, and each workflow
task it failed, with why.

A worker started warm is held at its first poll: its polls wait in the proxy until `go()`, as a
crashtest Python worker waits for its GO signal before it polls. Effects said inside an activity
(`effect:N.K` points) are a Python worker's alone: none are read here."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from temporalio.api.enums.v1 import TaskQueueKind
from temporalio.api.workflowservice.v1 import (
    PollActivityTaskQueueRequest,
    PollActivityTaskQueueResponse,
    PollWorkflowTaskQueueRequest,
    RespondWorkflowTaskCompletedRequest,
    RespondWorkflowTaskFailedRequest,
)

from temporal_crashtest._wire.tasks import (
    POLL_ACTIVITY,
    POLL_WORKFLOW,
    WORKFLOW_TASK_DONE,
    WORKFLOW_TASK_FAILED,
    ActivityTask,
    WireTasks,
)
from temporal_crashtest._wire.watch import Pass

_Poll = type[PollWorkflowTaskQueueRequest] | type[PollActivityTaskQueueRequest]
_POLLS: dict[str, _Poll] = {
    POLL_WORKFLOW: PollWorkflowTaskQueueRequest,
    POLL_ACTIVITY: PollActivityTaskQueueRequest,
}
_STICKY = TaskQueueKind.TASK_QUEUE_KIND_STICKY


class WireStatus(WireTasks):
    """One worker's status, read off the wire by its proxy's watcher."""

    def __init__(self, warm: bool = False) -> None:
        super().__init__()
        self.warm = asyncio.Event()
        self.ready = asyncio.Event()
        self.facts: dict[str, Any] = {}  # identity, sticky_s, task_queues, build_id
        self.crash: dict[str, Any] | None = None  # set by a kill (`kill.KillAtSite`)
        self.started: set[tuple[str, str, int]] = set()  # (workflow id, activity id, attempt)
        self.overran: list[dict[str, Any]] = []
        self.effects: list[dict[str, Any]] = []  # never any: see above
        self.unseen: list[dict[str, Any]] = []  # never any
        self.completions: list[dict[str, Any]] = []  # never any: the wire sees the completion
        self.task_failures: dict[str, tuple[float, str]] = {}  # run id -> (when, why)
        self._go = asyncio.Event()
        if not warm:
            self._go.set()
        self._running: dict[tuple[str, str], ActivityTask] = {}  # (run id, activity id)
        self._queues: list[str] = []
        self._ends_read = 0  # of `ended`

    def go(self) -> None:
        """Let a warm worker's polls through."""
        self._go.set()

    def drain(self) -> None:
        """Nothing waits: what the wire showed is kept as it passes."""

    def close(self) -> None:
        """Nothing to close: the proxy is stopped with the worker."""

    async def before(self, method: str, request: bytes) -> Pass:
        poll = _POLLS.get(method)
        if poll is None:
            return Pass.GO
        self.warm.set()
        await self._go.wait()
        asked = poll.FromString(request)
        if asked.task_queue.kind != _STICKY and asked.task_queue.name not in self._queues:
            self._queues.append(asked.task_queue.name)
        self.facts |= {"identity": asked.identity, "task_queues": list(self._queues)}
        self.facts.setdefault("build_id", None)
        self.ready.set()
        return Pass.GO

    async def after(self, method: str, request: bytes, response: bytes) -> None:
        await super().after(method, request, response)
        if method == WORKFLOW_TASK_DONE:
            done = RespondWorkflowTaskCompletedRequest.FromString(request)
            if done.HasField("sticky_attributes"):
                timeout = done.sticky_attributes.schedule_to_start_timeout
                self.facts["sticky_s"] = timeout.ToTimedelta().total_seconds()
        elif method == WORKFLOW_TASK_FAILED:
            failed = RespondWorkflowTaskFailedRequest.FromString(request)
            run_id = self.runs.get(failed.task_token)
            if run_id is not None:
                self.task_failures[run_id] = (time.time(), failed.failure.message)
        for end in self.ended[self._ends_read :]:
            self._running.pop((end.task.run_id, end.task.activity_id), None)
        self._ends_read = len(self.ended)

    def hand(self, answer: PollActivityTaskQueueResponse) -> None:
        super().hand(answer)
        task = self.handed.get(answer.task_token)
        if task is None:
            return
        self.started.add((task.workflow_id, task.activity_id, task.attempt))
        key = (task.run_id, task.activity_id)
        earlier = self._running.get(key)
        if earlier is not None and earlier.attempt < task.attempt:
            self.overran.append(
                {
                    "workflow_id": task.workflow_id,
                    "activity_id": task.activity_id,
                    "activity_type": task.activity_type,
                    "attempt": earlier.attempt,
                    "by": task.attempt,
                }
            )
        self._running[key] = task
