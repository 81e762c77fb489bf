"""What the wire says of a worker's tasks, in any SDK's words: each activity task handed out (an
activity poll's answer, or an eager activity in the answer to a workflow task's commands: its
task token, workflow, activity id, type and attempt) and how it ended on the worker (the
request that completed, failed or cancelled it, found by its token); and the workflow tasks it
holds (handed out, not yet answered).

This is what a kill on the wire needs: "after an activity's effect" is the moment its worker
sends `RespondActivityTaskCompleted` — the activity has run, the server does not know it yet —
and ending a dead worker's tasks at once needs the task tokens the server handed out (a
workflow task's, which an SDK keeps to itself, included)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.api.workflowservice.v1 import (
    PollActivityTaskQueueResponse,
    PollWorkflowTaskQueueResponse,
    RespondActivityTaskCanceledByIdRequest,
    RespondActivityTaskCanceledRequest,
    RespondActivityTaskCompletedByIdRequest,
    RespondActivityTaskCompletedRequest,
    RespondActivityTaskFailedByIdRequest,
    RespondActivityTaskFailedRequest,
    RespondWorkflowTaskCompletedRequest,
    RespondWorkflowTaskCompletedResponse,
    RespondWorkflowTaskFailedRequest,
)

from temporal_crashtest._history.attempts import backoff_after
from temporal_crashtest._wire.watch import Watcher

SERVICE = "/temporal.api.workflowservice.v1.WorkflowService/"
POLL_ACTIVITY = SERVICE + "PollActivityTaskQueue"
# Eager activities: the answer to a workflow task's commands hands out the activities it
# scheduled on the worker's own task queue, with no poll (SDKs ask for it by default).
WORKFLOW_TASK_DONE = SERVICE + "RespondWorkflowTaskCompleted"
POLL_WORKFLOW = SERVICE + "PollWorkflowTaskQueue"
WORKFLOW_TASK_FAILED = SERVICE + "RespondWorkflowTaskFailed"
_End = (
    RespondActivityTaskCompletedRequest
    | RespondActivityTaskFailedRequest
    | RespondActivityTaskCanceledRequest
)
_EndById = (
    RespondActivityTaskCompletedByIdRequest
    | RespondActivityTaskFailedByIdRequest
    | RespondActivityTaskCanceledByIdRequest
)
# How a worker ends an activity task, and the request that says it: by its token, or (an
# activity completed later, by a client: `complete()` given its ids) by workflow and activity id.
ENDS: dict[str, tuple[str, type[_End]]] = {
    SERVICE + "RespondActivityTaskCompleted": ("completed", RespondActivityTaskCompletedRequest),
    SERVICE + "RespondActivityTaskFailed": ("failed", RespondActivityTaskFailedRequest),
    SERVICE + "RespondActivityTaskCanceled": ("canceled", RespondActivityTaskCanceledRequest),
}
ENDS_BY_ID: dict[str, tuple[str, type[_EndById]]] = {
    SERVICE + "RespondActivityTaskCompletedById": (
        "completed",
        RespondActivityTaskCompletedByIdRequest,
    ),
    SERVICE + "RespondActivityTaskFailedById": ("failed", RespondActivityTaskFailedByIdRequest),
    SERVICE + "RespondActivityTaskCanceledById": (
        "canceled",
        RespondActivityTaskCanceledByIdRequest,
    ),
}


@dataclass(frozen=True)
class ActivityTask:
    """An activity attempt as a poll handed it to a worker."""

    token: bytes
    workflow_id: str
    run_id: str
    activity_id: str
    activity_type: str
    attempt: int
    maximum_attempts: int = 0  # its retry policy's (0: unlimited)
    non_retryable: tuple[str, ...] = ()  # its retry policy's error types that end it
    deadline: datetime | None = None  # when its schedule-to-close timeout expires
    backoff: timedelta = timedelta(seconds=1)  # its retry policy's interval after this attempt


@dataclass(frozen=True)
class TaskEnd:
    """A worker's end of an activity task, as it sent it."""

    task: ActivityTask
    how: str  # completed, failed, canceled
    identity: str  # the worker's, as its SDK names it (the server's pending activity keeps it)


class WireTasks(Watcher):
    """Every activity task handed out through the proxy, each end a worker sent for one, and the
    workflow tasks handed out and not yet answered (`workflow_tasks`: token -> workflow id;
    `runs`: every workflow task's token -> its run id)."""

    def __init__(self) -> None:
        self.handed: dict[bytes, ActivityTask] = {}
        self.ended: list[TaskEnd] = []
        self.workflow_tasks: dict[bytes, str] = {}
        self.runs: dict[bytes, str] = {}

    def end_of(self, method: str, request: bytes) -> TaskEnd | None:
        """The end of a task a worker's request says (None: not an end, or a task not seen)."""
        end = ENDS.get(method)
        if end is not None:
            how, kind = end
            said = kind.FromString(request)
            task = self.handed.get(said.task_token)
            return None if task is None else TaskEnd(task, how, said.identity)
        by_id = ENDS_BY_ID.get(method)
        if by_id is None:
            return None
        how, kind_by_id = by_id
        named = kind_by_id.FromString(request)
        latest = [  # the attempt handed out last (a dict keeps the order they came in)
            t
            for t in self.handed.values()
            if (t.workflow_id, t.activity_id) == (named.workflow_id, named.activity_id)
            and named.run_id in ("", t.run_id)
        ]
        return TaskEnd(latest[-1], how, named.identity) if latest else None

    async def after(self, method: str, request: bytes, response: bytes) -> None:
        if method == POLL_ACTIVITY:
            self.hand(PollActivityTaskQueueResponse.FromString(response))
        elif method == POLL_WORKFLOW:
            task = PollWorkflowTaskQueueResponse.FromString(response)
            if task.task_token and not task.HasField("query"):  # not a legacy query's task
                self._workflow_task(task)
        elif method == WORKFLOW_TASK_DONE:
            done = RespondWorkflowTaskCompletedRequest.FromString(request)
            self.workflow_tasks.pop(done.task_token, None)
            answer = RespondWorkflowTaskCompletedResponse.FromString(response)
            for eager in answer.activity_tasks:
                self.hand(eager)
            if answer.workflow_task.task_token:  # the next one, handed out at once
                self._workflow_task(answer.workflow_task)
        elif method == WORKFLOW_TASK_FAILED:
            token = RespondWorkflowTaskFailedRequest.FromString(request).task_token
            self.workflow_tasks.pop(token, None)
        elif (end := self.end_of(method, request)) is not None:
            self.ended.append(end)

    def _workflow_task(self, task: PollWorkflowTaskQueueResponse) -> None:
        self.workflow_tasks[task.task_token] = task.workflow_execution.workflow_id
        self.runs[task.task_token] = task.workflow_execution.run_id

    def hand(self, answer: PollActivityTaskQueueResponse) -> None:
        """An activity task handed out (an empty answer: none)."""
        if answer.task_token:  # an empty answer: the long poll ended with no task
            policy = answer.retry_policy
            s2c = answer.schedule_to_close_timeout.ToTimedelta()
            scheduled = answer.scheduled_time.ToDatetime(tzinfo=UTC)
            self.handed[answer.task_token] = ActivityTask(
                token=answer.task_token,
                workflow_id=answer.workflow_execution.workflow_id,
                run_id=answer.workflow_execution.run_id,
                activity_id=answer.activity_id,
                activity_type=answer.activity_type.name,
                attempt=answer.attempt,
                maximum_attempts=policy.maximum_attempts,
                non_retryable=tuple(policy.non_retryable_error_types),
                deadline=scheduled + s2c if s2c and answer.HasField("scheduled_time") else None,
                backoff=backoff_after(
                    answer.attempt,
                    policy.initial_interval.ToTimedelta() or None,
                    policy.backoff_coefficient,
                    policy.maximum_interval.ToTimedelta() or None,
                ),
            )
