"""Fast-forward a recovery: do at once what the server would do only after a timeout.

After a SIGKILL the server notices the dead worker only through timeouts: an activity attempt it
held ends at its heartbeat (or start-to-close) timeout, the next workflow task waits out the dead
worker's sticky queue, and a workflow task it held ends at the workflow task timeout. None of
these waits tests anything; together they are nearly all of a cell's time. So, the moment the
worker is dead:

- every activity attempt it held is failed through its task token with a retryable failure
  (`WORKER_KILLED`), which the server retries under the activity's own retry policy, as it would
  after the timeout. An attempt that the timeout would end for good (no attempt left, or the
  schedule-to-close timeout too near) is left to the timeout: the workflow then sees exactly
  what it would in production;
- so is every other attempt the server says the dead worker holds (a pending activity of the
  tree last started by its identity): one that had returned but whose completion was not sent
  yet, a task it had received and not started. These are failed by id, and named;
- every open run of the tree is taken off the dead worker's sticky queue (ResetStickyTaskQueue),
  so its next workflow task goes to the live worker now;
- a workflow task the dead worker held cannot be ended from outside (its task token never leaves
  the SDK), so a cell whose kill holds one runs its tree with a short workflow task timeout
  (`SHORT_TASK_TIMEOUT`) instead.

The report still says what each recovery would have waited on in production
(`history.recovery_waits`).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.common.v1 import Payloads, WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.api.workflowservice.v1 import (
    ResetStickyTaskQueueRequest,
    RespondActivityTaskFailedByIdRequest,
    RespondActivityTaskFailedRequest,
)
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from temporal_crashtest._interceptor import WORKER_KILLED, Attempt
from temporal_crashtest._polling import open_runs

# A workflow task here takes 10-250 ms, 11 cells at once on 2 cores: 1 s leaves room for a loaded
# machine; a task that times out all the same where production's would not (a live worker's, or
# an unrecorded attempt) runs its cell again without it (history.unexplained_task_timeouts).
SHORT_TASK_TIMEOUT = timedelta(seconds=1)
IDENTITY = "temporal-crashtest"


@dataclass(frozen=True)
class FastForward:
    """What a fast-forward did (for the report), and the activities it found the dead worker
    held besides those its interceptor knew of (their types)."""

    done: list[str]
    also_held: list[str]


async def fast_forward(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    attempts: list[Attempt],
    why: str,
    identity: str | None = None,
) -> FastForward:
    """Right after a kill: take the tree's open runs off the dead worker's sticky queue, then
    fail the attempts it held that another attempt follows (keeping their last heartbeat's
    details): those its interceptor reported (`attempts`), and every other pending activity the
    server last started on the dead worker (`identity`)."""
    runs = await open_runs(client, handle)
    details: dict[tuple[str, str, str], Payloads] = {}
    others: list[tuple[str, str, PendingActivityInfo]] = []
    known = {(a.workflow_id, a.run_id, a.activity_id) for a in attempts}
    for run in runs:
        for pending in run.description.raw_description.pending_activities:
            key = (run.description.id, run.description.run_id, pending.activity_id)
            details[key] = pending.heartbeat_details
            started = pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            if identity and started and pending.last_worker_identity == identity:
                if key not in known:
                    others.append((run.description.id, run.description.run_id, pending))

    async def off_sticky(workflow_id: str, run_id: str) -> None:
        with contextlib.suppress(RPCError):  # the run closed meanwhile
            await client.workflow_service.reset_sticky_task_queue(
                ResetStickyTaskQueueRequest(
                    namespace=client.namespace,
                    execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
                )
            )

    await asyncio.gather(*(off_sticky(r.description.id, r.description.run_id) for r in runs))
    failure = Failure(
        message=f"worker killed by crashtest: {why}",
        application_failure_info=ApplicationFailureInfo(type=WORKER_KILLED, non_retryable=False),
    )

    async def end(attempt: Attempt) -> str | None:
        beat = details.get((attempt.workflow_id, attempt.run_id, attempt.activity_id))
        request = RespondActivityTaskFailedRequest(
            namespace=client.namespace,
            task_token=attempt.task_token(),
            failure=failure,
            identity=IDENTITY,
            last_heartbeat_details=beat if beat is not None and beat.payloads else None,
        )
        try:
            await client.workflow_service.respond_activity_task_failed(request)
        except RPCError as err:  # it ended already (timed out, or its run closed)
            return f"an attempt had ended already ({err.status.name}: {err.message})"
        return None

    async def end_by_id(workflow_id: str, run_id: str, pending: PendingActivityInfo) -> bool:
        beat = pending.heartbeat_details
        request = RespondActivityTaskFailedByIdRequest(
            namespace=client.namespace,
            workflow_id=workflow_id,
            run_id=run_id,
            activity_id=pending.activity_id,
            failure=failure,
            identity=IDENTITY,
            last_heartbeat_details=beat if beat.payloads else None,
        )
        try:
            await client.workflow_service.respond_activity_task_failed_by_id(request)
        except RPCError:  # it ended already (completed, timed out, or its run closed)
            return False
        return True

    ends = await asyncio.gather(*(end(a) for a in attempts if a.retryable))
    retried = [p for p in others if _retry_follows(p[2])]
    by_id = await asyncio.gather(*(end_by_id(*p) for p in retried))
    done = [f"{len(runs)} open run(s) taken off the killed worker's sticky queue"]
    if ended := sum(e is None for e in ends):
        done.append(f"{ended} attempt(s) it held failed at once, to be retried")
    also = [p[2].activity_type.name for p, ok in zip(retried, by_id, strict=True) if ok]
    if also:
        done.append(
            f"{len(also)} more it held (returned, not yet reported, or received, not started: "
            f"{', '.join(also)}) failed at once, to be retried"
        )
    done += sorted({e for e in ends if e is not None})
    final = sum(not a.retryable for a in attempts) + len(others) - len(retried)
    if final:
        done.append(f"{final} attempt(s) left to their timeout (no retry would follow it)")
    return FastForward(done, also)


def _retry_follows(pending: PendingActivityInfo) -> bool:
    """Whether the server would start another attempt after this one's timeout: attempts left,
    and time before its schedule-to-close deadline (`expiration_time`)."""
    if pending.maximum_attempts and pending.attempt >= pending.maximum_attempts:
        return False
    if pending.HasField("expiration_time") and pending.expiration_time.seconds:
        left = pending.expiration_time.ToDatetime(tzinfo=UTC) - datetime.now(UTC)
        return left > timedelta(seconds=1)
    return True
