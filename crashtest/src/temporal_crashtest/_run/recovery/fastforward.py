"""Fast-forward a recovery: do at once what the server would do only after a timeout.

After a SIGKILL the server notices the dead worker only through timeouts: an activity attempt it
held ends at its heartbeat (or start-to-close) timeout, the next workflow task waits out the dead
worker's sticky queue, and a workflow task it held ends at the workflow task timeout. None of
these waits tests anything; together they are nearly all of a cell's time. So, the moment the
worker is dead:

- every activity attempt it held is failed through its task token with a retryable failure
  (`WORKER_KILLED`), which the server retries under the activity's own retry policy, as it would
  after the timeout. An attempt that the timeout would end for good (no attempt left, or the
  schedule-to-close timeout too near: `_attempt_end`) has the timeout that ends it for good
  shortened to `ENDING_TIMEOUT` on the server (UpdateActivityOptions): its own timeout when no
  attempt is left, the schedule-to-close timeout when the window runs out (shortening the
  attempt's own would leave room for a retry production never makes). The server times it out
  itself, so the workflow sees the activity fail exactly as it would once the timeout
  expired, and handles it as its code says (a `try`/`except` around an optional step goes on to
  the normal end);
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
from datetime import timedelta
from typing import Any

from temporalio.api.activity.v1 import ActivityOptions
from temporalio.api.common.v1 import Payloads, WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.api.workflowservice.v1 import (
    ResetStickyTaskQueueRequest,
    RespondActivityTaskFailedByIdRequest,
    RespondActivityTaskFailedRequest,
    UpdateActivityOptionsRequest,
)
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from temporal_crashtest._history.attempts import pending_end
from temporal_crashtest._history.load import ActivityOf
from temporal_crashtest._points.sites import WORKER_KILLED
from temporal_crashtest._run.recovery.polling import OpenRun, open_runs
from temporal_crashtest._worker.interceptor import Attempt

# A workflow task here takes 10-250 ms, 11 cells at once on 2 cores: 1 s leaves room for a loaded
# machine; a task that times out all the same where production's would not (a live worker's, or
# an unrecorded attempt) runs its cell again without it (history.unexplained_task_timeouts).
SHORT_TASK_TIMEOUT = timedelta(seconds=1)
ENDING_TIMEOUT = timedelta(seconds=1)  # what a dead worker's last attempt's timeout becomes
IDENTITY = "temporal-crashtest"


@dataclass(frozen=True)
class FastForward:
    """What a fast-forward did (for the report), and the activities it found the dead worker
    held besides those its interceptor knew of (their types, and which they are)."""

    done: list[str]
    also_held: list[str]
    held: frozenset[ActivityOf] = frozenset()


_Where = tuple[str, str, str]  # workflow id, run id, activity id


async def fast_forward(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    attempts: list[Attempt],
    why: str,
    identity: str | None = None,
    killed: _Where | None = None,
) -> FastForward:
    """Right after a kill: take the tree's open runs off the dead worker's sticky queue, then
    fail the attempts it held that another attempt follows (keeping their last heartbeat's
    details): those its interceptor reported (`attempts`), and every other pending activity the
    server last started on the dead worker (`identity`). `killed`: the attempt a kill on the
    wire died reporting (no interceptor reports it): found as the others are, said as the
    interceptor's are, not among the others it held."""
    runs = await open_runs(client, handle)
    details: dict[_Where, Payloads] = {}
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
    await asyncio.gather(*(_off_sticky(client, r) for r in runs))
    failure = _killed(why)
    ends = await asyncio.gather(*(_end(client, a, details, failure) for a in attempts))
    held = await asyncio.gather(*(end_held(client, *p, why) for p in others))
    ended = [p for p, ok in zip(others, held, strict=True) if ok]
    also = [p.activity_type.name for w, r, p in ended if (w, r, p.activity_id) != killed]
    dying = [pending_end(p) for w, r, p in ended if (w, r, p.activity_id) == killed]
    found = frozenset((run_id, pending.activity_id) for _, run_id, pending in others)
    done = _what_was_done(len(runs), attempts, ends, also, [(e.retried, e.shorten) for e in dying])
    return FastForward(done, also, found)


async def _off_sticky(client: Client, run: OpenRun) -> None:
    """The run's next workflow task goes to its normal queue, not the dead worker's."""
    with contextlib.suppress(RPCError):  # the run closed meanwhile
        await client.workflow_service.reset_sticky_task_queue(
            ResetStickyTaskQueueRequest(
                namespace=client.namespace,
                execution=WorkflowExecution(
                    workflow_id=run.description.id, run_id=run.description.run_id
                ),
            )
        )


async def _end(
    client: Client, attempt: Attempt, details: dict[_Where, Payloads], failure: Failure
) -> str | None:
    """End an attempt the dead worker held: failed, to be retried, with its last heartbeat's
    details, or (no retry follows) timed out soon. A line for the report if it had ended
    already, else None."""
    where = (attempt.workflow_id, attempt.run_id, attempt.activity_id)
    if not attempt.retryable:
        return await _time_out_soon(client, *where, attempt.shorten)
    beat = details.get(where)
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


def _what_was_done(
    runs: int,
    attempts: list[Attempt],
    ends: list[str | None],
    also: list[str],
    killed: list[tuple[bool, str]],
) -> list[str]:
    """The fast-forward's lines for the report (`killed`: the attempt a kill on the wire died
    reporting, if it was ended: whether a retry follows, the timeout shortened if not)."""
    done = [f"{runs} open run(s) taken off the killed worker's sticky queue"]
    ended = [(e is None, a.retryable, a.shorten) for e, a in zip(ends, attempts, strict=True)]
    ended += [(True, retryable, shorten) for retryable, shorten in killed]
    if retried := sum(ok for ok, retryable, _ in ended if retryable):
        done.append(f"{retried} attempt(s) it held failed at once, to be retried")
    for ok, retryable, shorten in ended:
        if ok and not retryable:
            done.append(
                f"an attempt no retry follows: its {shorten} timeout shortened to "
                f"{ENDING_TIMEOUT.total_seconds():g} s, so the server times it out now and the "
                "workflow handles the activity's failure"
            )
    if also:
        done.append(
            f"{len(also)} more it held (returned, not yet reported, or received, not started: "
            f"{', '.join(also)}) ended at once (failed to be retried, or timed out)"
        )
    return done + sorted({e for e in ends if e is not None})


def _killed(why: str) -> Failure:
    """The failure an attempt a killed worker held is ended with: retryable, of its own type."""
    return Failure(
        message=f"worker killed by crashtest: {why}",
        application_failure_info=ApplicationFailureInfo(type=WORKER_KILLED, non_retryable=False),
    )


async def end_held(
    client: Client, workflow_id: str, run_id: str, pending: PendingActivityInfo, why: str
) -> bool:
    """End a pending activity's attempt that a dead worker holds: failed, to be retried, or, if
    no retry follows, timed out by the server now (`_time_out_soon`). False if it had ended."""
    end = pending_end(pending)
    if not end.retried:
        shortened = await _time_out_soon(
            client, workflow_id, run_id, pending.activity_id, end.shorten
        )
        return shortened is None
    beat = pending.heartbeat_details
    request = RespondActivityTaskFailedByIdRequest(
        namespace=client.namespace,
        workflow_id=workflow_id,
        run_id=run_id,
        activity_id=pending.activity_id,
        failure=_killed(why),
        identity=IDENTITY,
        last_heartbeat_details=beat if beat.payloads else None,
    )
    try:
        await client.workflow_service.respond_activity_task_failed_by_id(request)
    except RPCError:  # it ended already (completed, timed out, or its run closed)
        return False
    return True


# An attempt no retry follows that had ended before its timeout could be shortened: on a loaded
# machine, by its own start-to-close while the crash test was late (the saga's bank account then
# failed with a TimeoutError, where production, timed for real, fails it by its window with its
# ApplicationError): the run did not go production's way, one of load's marks (`crashed_run`).
LEFT_TO_ITS_TIMEOUT = "an attempt no retry follows is left to its timeout"
_TIMEOUT_FIELDS = {
    "heartbeat": "heartbeat_timeout",
    "start-to-close": "start_to_close_timeout",
    "schedule-to-close": "schedule_to_close_timeout",
}


async def _time_out_soon(
    client: Client, workflow_id: str, run_id: str, activity_id: str, kind: str
) -> str | None:
    """Shorten the pending activity's timeout of `kind` (heartbeat, start-to-close, ...) to
    ENDING_TIMEOUT on the server, which then times the attempt out as production's timeout
    would, only sooner; why not, if it could not be done."""
    name = _TIMEOUT_FIELDS.get(kind, "start_to_close_timeout")
    options = ActivityOptions()
    getattr(options, name).FromTimedelta(ENDING_TIMEOUT)
    request = UpdateActivityOptionsRequest(
        namespace=client.namespace,
        execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
        identity=IDENTITY,
        id=activity_id,
        activity_options=options,
    )
    request.update_mask.paths.append(name)
    try:
        await client.workflow_service.update_activity_options(request)
    except RPCError as err:  # it ended already (its run closed), or the server cannot
        return f"{LEFT_TO_ITS_TIMEOUT} ({err.status.name}: {err.message})"
    return None
