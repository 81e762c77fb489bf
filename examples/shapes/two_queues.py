"""A workflow whose activities run on two task queues, served by one worker process: the charge
on the workflow's own queue, the receipt on a queue of its own (`{task_queue}-notify`, as the
worker-specific task queue pattern gives some activities a queue of their own). The factory
returns both Workers; crashtest crashes the boundaries of both queues like the rest.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import OPTIONS
    from examples.shapes.charges import ChargeActivities, Key
    from examples.shapes.ledger import open_ledger, workflow_key


def notify_queue(task_queue: str) -> str:
    return f"{task_queue}-notify"


@workflow.defn
class ChargeThenNotify:
    @workflow.run
    async def run(self, invoice: str) -> None:
        await workflow.execute_activity_method(ChargeActivities.charge, invoice, **OPTIONS)
        await workflow.execute_activity_method(
            ChargeActivities.send_receipt,
            invoice,
            task_queue=notify_queue(workflow.info().task_queue),
            **OPTIONS,
        )


async def _workers(client: Client, task_queue: str, key: Key) -> list[Worker]:
    pool = await open_ledger()
    activities = ChargeActivities(pool, charge_key=key, receipt_key=key)
    return [
        Worker(
            client,
            task_queue=task_queue,
            workflows=[ChargeThenNotify],
            activities=[activities.charge],
        ),
        Worker(client, task_queue=notify_queue(task_queue), activities=[activities.send_receipt]),
    ]


async def keyed_worker(client: Client, task_queue: str) -> list[Worker]:
    return await _workers(client, task_queue, workflow_key)


async def unkeyed_worker(client: Client, task_queue: str) -> list[Worker]:
    return await _workers(client, task_queue, None)
