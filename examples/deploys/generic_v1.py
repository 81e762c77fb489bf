"""`Order` through one activity type, version 1: every step is `step(effect)`, as agent frameworks
run each model call or tool through one activity; the charge, then the receipt."""

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
        for effect in (f"charge {order}", f"receipt for {order}"):
            await workflow.execute_activity_method(ChargeActivities.step, effect, **OPTIONS)


async def worker(client: Client, task_queue: str) -> Worker:
    return await order_worker(client, task_queue, Order)
