"""Charges one after another: a workflow with as many boundaries as it has invoices (the bench
grows it to measure how a crash test's time grows with the number of boundaries).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.charges import ChargeActivities
    from examples.shapes.ledger import workflow_key


@workflow.defn
class ChargeEach:
    @workflow.run
    async def run(self, invoices: int) -> int:
        for n in range(1, invoices + 1):
            await workflow.execute_activity_method(ChargeActivities.charge, f"inv-{n}", **OPTIONS)
        return invoices


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client,
        task_queue,
        [ChargeEach],
        lambda p: ChargeActivities(p, charge_key=workflow_key, receipt_key=workflow_key).all(),
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    """Charges without a key: every charge's after-effect point charges twice."""
    return await shape_worker(
        client,
        task_queue,
        [ChargeEach],
        lambda p: ChargeActivities(p, charge_key=None, receipt_key=workflow_key).all(),
    )
