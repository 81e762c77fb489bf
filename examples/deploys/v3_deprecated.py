"""`Order`, version 3, the third stage of Temporal's versioning guide: once no run that started
before v2_patched is left, the patch is deprecated (`workflow.deprecate_patch`) and the notice is
always sent. A run v2_patched took past the notice replays (its marker is accepted); a v1 run
still in flight does not: it was never patched, and v3 has no v1 path left."""

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
        await workflow.execute_activity_method(ChargeActivities.charge, order, **OPTIONS)
        workflow.deprecate_patch(NOTICE_PATCH)
        await workflow.execute_activity_method(ChargeActivities.send_notice, order, **OPTIONS)
        await workflow.execute_activity_method(ChargeActivities.send_receipt, order, **OPTIONS)


async def worker(client: Client, task_queue: str) -> Worker:
    return await order_worker(client, task_queue, Order)
