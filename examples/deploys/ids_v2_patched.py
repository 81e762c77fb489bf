"""`Order`, version 2 of `ids_v1`: the notice behind `workflow.patched`, with an id of its own. A
run reset on this version sends the notice once and finds the charge and the receipt under their
own keys (the positional v2_patched sends the receipt again: the notice takes its key)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.deploys.steps import WORKFLOW, order_worker
    from examples.deploys.v2_patched import NOTICE_PATCH
    from examples.shapes.build import OPTIONS
    from examples.shapes.charges import ChargeActivities


@workflow.defn(name=WORKFLOW)
class Order:
    @workflow.run
    async def run(self, order: str) -> None:
        await workflow.execute_activity_method(
            ChargeActivities.charge, order, activity_id="charge", **OPTIONS
        )
        if workflow.patched(NOTICE_PATCH):
            await workflow.execute_activity_method(
                ChargeActivities.send_notice, order, activity_id="notice", **OPTIONS
            )
        await workflow.execute_activity_method(
            ChargeActivities.send_receipt, order, activity_id="receipt", **OPTIONS
        )


async def worker(client: Client, task_queue: str) -> Worker:
    return await order_worker(client, task_queue, Order)
