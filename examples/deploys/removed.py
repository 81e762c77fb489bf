"""`Order` with the receipt removed, without a patch (the mistake): a run v1 had taken as far as
scheduling the receipt is blocked on this version (its history holds a step the code no longer
makes: a nondeterminism error)."""

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


async def worker(client: Client, task_queue: str) -> Worker:
    return await order_worker(client, task_queue, Order)
