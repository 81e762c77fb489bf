"""An order placed after a person approves it: the workflow waits for the `approve` update, whose
handler records the approval (an activity scheduled from a message handler is a boundary like any
other); then it places the order. crashtest sends the update with `--drive
examples.shapes.approval:approve`; without it the run waits for ever, and crashtest says so."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.worker import Worker

# The activities' side (Postgres, the project's settings) is not workflow code: the sandbox
# passes it through instead of importing it again for every run.
with workflow.unsafe.imports_passed_through():
    from psycopg_pool import AsyncConnectionPool

    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.ledger import record, workflow_key


RESEND_AFTER_S = 0.5


class ApprovalActivities:
    def __init__(self, pool: AsyncConnectionPool, *, keyed: bool) -> None:
        self.pool = pool
        self.keyed = keyed

    def _key(self) -> str | None:
        return workflow_key() if self.keyed else None

    @activity.defn
    async def record_approval(self, approver: str) -> None:
        await record(self.pool, f"approved by {approver}", self._key())

    @activity.defn
    async def place_order(self, order: str) -> None:
        await record(self.pool, f"order {order}", self._key())

    def all(self) -> list[Callable[..., Any]]:
        return [self.record_approval, self.place_order]


@workflow.defn
class ApprovedOrder:
    def __init__(self) -> None:
        self.approved_by: str | None = None

    @workflow.update
    async def approve(self, approver: str) -> str:
        await workflow.execute_activity_method(
            ApprovalActivities.record_approval, approver, **OPTIONS
        )
        self.approved_by = approver
        return "approved"

    @workflow.run
    async def run(self, order: str) -> None:
        await workflow.wait_condition(lambda: self.approved_by is not None)
        await workflow.execute_activity_method(ApprovalActivities.place_order, order, **OPTIONS)
        await workflow.wait_condition(workflow.all_handlers_finished)


async def approve(handle: WorkflowHandle[Any, Any]) -> None:
    """crashtest's DRIVE: the approver's click, sent until the run takes it. A worker may be dead
    or its workflow task failing for the moment (a kill, a loaded machine): the server refuses
    the update then, and the click is sent again; its update id makes a second send that the
    run had already taken the same update, not another."""
    while True:
        try:
            await handle.execute_update(ApprovedOrder.approve, "sam", id="approve-sam")
            return
        except RPCError:
            await asyncio.sleep(RESEND_AFTER_S)


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client, task_queue, [ApprovedOrder], lambda p: ApprovalActivities(p, keyed=True).all()
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client, task_queue, [ApprovedOrder], lambda p: ApprovalActivities(p, keyed=False).all()
    )
