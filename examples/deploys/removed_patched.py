"""`Order` with the receipt removed behind a patch, done right: `if not workflow.patched(...)`
keeps the receipt for a run v1 took past the charge (it replays v1's path), and a new run takes
the path without it."""

from __future__ import annotations

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.deploys.steps import WORKFLOW, order_worker
    from examples.shapes.build import OPTIONS
    from examples.shapes.charges import ChargeActivities

NO_RECEIPT_PATCH = "no-receipt"


@workflow.defn(name=WORKFLOW)
class Order:
    @workflow.run
    async def run(self, order: str) -> None:
        await workflow.execute_activity_method(ChargeActivities.charge, order, **OPTIONS)
        if not workflow.patched(NO_RECEIPT_PATCH):
            await workflow.execute_activity_method(ChargeActivities.send_receipt, order, **OPTIONS)


async def worker(client: Client, task_queue: str) -> Worker:
    return await order_worker(client, task_queue, Order)
