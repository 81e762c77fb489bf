"""`Order`, version 2 with a changed input: the receipt now names the currency. No step moved, so
every run ends in one version's state; but replay never compares inputs, so a receipt v1 had
scheduled still runs with v1's input on v2's worker, and nothing says so."""

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
        await workflow.execute_activity_method(
            ChargeActivities.send_receipt, f"{order} in EUR", **OPTIONS
        )


async def worker(client: Client, task_queue: str) -> Worker:
    return await order_worker(client, task_queue, Order)
