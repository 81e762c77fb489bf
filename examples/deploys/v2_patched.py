"""`Order`, version 2 done right: the notice behind `workflow.patched`, so a run that v1 had
taken past the charge keeps v1's path when it replays, and a new run takes v2's."""

from __future__ import annotations

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.deploys.steps import WORKFLOW, order_worker
    from examples.shapes.build import OPTIONS
    from examples.shapes.charges import ChargeActivities

NOTICE_PATCH = "notice-before-receipt"


@workflow.defn(name=WORKFLOW)
class Order:
    @workflow.run
    async def run(self, order: str) -> None:
        await workflow.execute_activity_method(ChargeActivities.charge, order, **OPTIONS)
        if workflow.patched(NOTICE_PATCH):
            await workflow.execute_activity_method(ChargeActivities.send_notice, order, **OPTIONS)
        await workflow.execute_activity_method(ChargeActivities.send_receipt, order, **OPTIONS)


async def worker(client: Client, task_queue: str) -> Worker:
    return await order_worker(client, task_queue, Order)
