"""A reset cell: the run goes to its end, is reset to the workflow task before its boundary
(as an operator's `temporal workflow reset` would), and goes to its end again; in a deploy test
the reset run is the new version's."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from temporal_crashtest._errors import CellFailed
from temporal_crashtest._history.tree import Boundary, read_tree
from temporal_crashtest._plan.reference import CellPoint
from temporal_crashtest._run.cell import Outcome
from temporal_crashtest._run.recovery.waiting import until_one_ends
from temporal_crashtest._run.session import Session, Started
from temporal_crashtest._run.workers import Worker


async def reset_run(session: Session, point: CellPoint, workflow_id: str) -> Outcome:
    """Run to the end; reset to the workflow task before the boundary; run to the end (or why
    that could not be done: `Outcome.failed`)."""
    deadline = time.monotonic() + session.deadline_s
    queue = workflow_id
    worker = await session.workers.start(f"{queue}-a", queue)
    workers = [worker]
    run: Started | None = None
    try:
        run = await session.start(workflow_id, queue)
        waited = await until_one_ends(session, run, worker, deadline, frozenset())
        _ended(session, run, worker, "the run")
        tree = read_tree(await session.histories(run.handle), waited.served)
        here = _boundary(tree.boundaries, point.boundary)
        await asyncio.sleep(session.resume_after_s)  # e.g. past an idempotency key's TTL
        if session.target.deploy is not None:  # the reset run is the new version's
            await session.workers.stop([worker])
            worker = await session.workers.start(f"{queue}-b", queue, deployed=True)
            workers.append(worker)
        reason = f"crashtest: {point.crash_at}, run again from before {point.boundary.label}"
        run = run.again(await _reset(session, here, reason, workflow_id))
        reset_at = time.monotonic()
        await until_one_ends(session, run, worker, deadline, frozenset())
        end = _ended(session, run, worker, "the reset run")
        return Outcome(
            workflow_id=workflow_id,
            handle=run.handle,
            end=end,
            recovery_s=time.monotonic() - reset_at,
        )
    except CellFailed as err:
        return Outcome(workflow_id=workflow_id, handle=run.handle if run else None, failed=str(err))
    finally:
        if run is not None:
            await run.give_up()
        await session.workers.stop(workers)


def _ended(session: Session, run: Started, worker: Worker, what: str) -> str:
    if not run.result.done():
        raise CellFailed(
            f"the worker exited before {what} ended: {session.workers.last_line(worker)}"
        )
    return run.ending()


def _boundary(boundaries: list[Boundary], b: Boundary) -> Boundary:
    """This run's boundary at the reference's `b`'s place."""
    for here in boundaries:
        if (here.scope, here.position) == (b.scope, b.position):
            return here
    raise CellFailed(f"this run has no boundary {b.label} to reset to")


async def _reset(
    session: Session, here: Boundary, reason: str, workflow_id: str
) -> WorkflowHandle[Any, Any]:
    """Reset the run to the workflow task before `here`; the new run's handle."""
    client = session.client
    try:
        reset = await client.workflow_service.reset_workflow_execution(
            ResetWorkflowExecutionRequest(
                namespace=client.namespace,
                workflow_execution=WorkflowExecution(
                    workflow_id=here.workflow_id, run_id=here.run_id
                ),
                reason=reason,
                workflow_task_finish_event_id=here.reset_event_id,
                request_id=str(uuid.uuid4()),
            )
        )
    except RPCError as err:
        raise CellFailed(f"the reset was refused: {err}") from None
    return client.get_workflow_handle(workflow_id, run_id=reset.run_id)
