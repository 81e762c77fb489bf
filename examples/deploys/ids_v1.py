"""`Order`, version 1 with explicit activity ids: each step's key (`workflow_id:activity_id`)
names the step, not its position, so no later version can move it."""

from __future__ import annotations

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.deploys.steps import WORKFLOW, order_worker
    from examples.shapes.build import OPTIONS
    from examples.shapes.charges import ChargeActivities


@workflow.defn(name=WORKFLOW)
class Order:
    @workflow.run
    async def run(self, order: str) -> None:
        await workflow.execute_activity_method(
            ChargeActivities.charge, order, activity_id="charge", **OPTIONS
        )
        await workflow.execute_activity_method(
            ChargeActivities.send_receipt, order, activity_id="receipt", **OPTIONS
        )


async def worker(client: Client, task_queue: str) -> Worker:
    return await order_worker(client, task_queue, Order)
