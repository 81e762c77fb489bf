"""A local activity's effect: charge the card in a local activity, then send a receipt.

A local activity's result becomes durable only when the workflow task that ran it completes (its
marker is recorded then): a worker killed after the charge and before that charges again on the
fresh worker unless the charge carries a key.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The activities' side (Postgres, the project's settings) is not workflow code: the sandbox
# passes it through instead of importing it again for every run.
with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.charges import ChargeActivities
    from examples.shapes.ledger import workflow_key


@workflow.defn
class LocalCharge:
    @workflow.run
    async def run(self, invoice: str) -> None:
        await workflow.execute_local_activity_method(
            ChargeActivities.charge,
            invoice,
            start_to_close_timeout=timedelta(seconds=5),
            retry_policy=OPTIONS["retry_policy"],
        )
        await workflow.execute_activity_method(ChargeActivities.send_receipt, invoice, **OPTIONS)


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client,
        task_queue,
        [LocalCharge],
        lambda p: ChargeActivities(p, charge_key=workflow_key, receipt_key=workflow_key).all(),
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client,
        task_queue,
        [LocalCharge],
        lambda p: ChargeActivities(p, charge_key=None, receipt_key=workflow_key).all(),
    )
