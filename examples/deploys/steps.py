"""The worker of every version of `Order`: the shapes' charge, notice and receipt activities
(`examples.shapes.charges`), each effect one row in the ledger, keyed by
`workflow_id:activity_id`."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from examples.shapes.build import shape_worker
from examples.shapes.charges import ChargeActivities
from examples.shapes.ledger import workflow_key

WORKFLOW = "Order"


async def order_worker(client: Client, task_queue: str, workflow: type, **options: Any) -> Worker:
    """A worker of one version of `Order` (every version runs the same activities); `options`:
    more of `Worker`'s."""
    return await shape_worker(
        client,
        task_queue,
        [workflow],
        lambda pool: ChargeActivities(
            pool, charge_key=workflow_key, receipt_key=workflow_key
        ).all(),
        **options,
    )
