"""Ending at once what a worker killed on the wire held, where production waits out a timeout.

Its activity attempts are the server's pending activities last started by its identity
(`_fastforward.fast_forward(..., identity=...)`, as for the in-process kill). Its workflow
tasks are new here: an SDK keeps a workflow task's token to itself, so a worker killed in
process holds its task until the workflow task timeout; on the wire the token is seen
(`tasks.WireTasks.workflow_tasks`), and the task is failed at once, as a worker that lost its
cache fails one (RESET_STICKY_TASK_QUEUE): the server hands the run's next workflow task out
now, to a live worker, which replays the history as the timeout's would."""

from __future__ import annotations

from collections.abc import Iterable

from temporalio.api.enums.v1 import WorkflowTaskFailedCause
from temporalio.api.failure.v1 import Failure
from temporalio.api.workflowservice.v1 import RespondWorkflowTaskFailedRequest
from temporalio.client import Client
from temporalio.service import RPCError

from temporal_crashtest._fastforward import IDENTITY

LOST_CACHE = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_STICKY_TASK_QUEUE


async def end_workflow_tasks(client: Client, tokens: Iterable[bytes], why: str) -> int:
    """Fail the workflow tasks a dead worker held; how many were still open (one that ended
    meanwhile, answered or timed out, is passed over). Its proxy's calls cut off first
    (`WireProxy.cut_off`): a poll of the dead worker still open would take the next one."""
    ended = 0
    for token in tokens:
        request = RespondWorkflowTaskFailedRequest(
            namespace=client.namespace,
            task_token=token,
            cause=LOST_CACHE,
            failure=Failure(message=f"worker killed by crashtest: {why}"),
            identity=IDENTITY,
        )
        try:
            await client.workflow_service.respond_workflow_task_failed(request)
        except RPCError:
            continue
        ended += 1
    return ended
