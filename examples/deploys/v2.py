"""`Order`, version 2: a notice inserted before the receipt, without a patch (the mistake)."""

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
        await workflow.execute_activity_method(ChargeActivities.charge, order, **OPTIONS)
        await workflow.execute_activity_method(ChargeActivities.send_notice, order, **OPTIONS)
        await workflow.execute_activity_method(ChargeActivities.send_receipt, order, **OPTIONS)


async def worker(client: Client, task_queue: str) -> Worker:
    return await order_worker(client, task_queue, Order)
