"""`Order` through one activity type, version 2: a notice inserted before the receipt, with no
patch. Replay matches each `step` by type and id only, so no nondeterminism error stops a run v1
had taken past the charge: its scheduled receipt comes back as the notice's result, and the
receipt is sent again under a new id (the mistake a generic activity hides)."""

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
        for effect in (f"charge {order}", f"notice for {order}", f"receipt for {order}"):
            await workflow.execute_activity_method(ChargeActivities.step, effect, **OPTIONS)


async def worker(client: Client, task_queue: str) -> Worker:
    return await order_worker(client, task_queue, Order)
