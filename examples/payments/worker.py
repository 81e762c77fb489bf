"""The worker factories crashtest is pointed at: FACTORY(client, task_queue) -> Worker.

    python -m temporal_crashtest run --worker examples.payments.worker:keyed_worker \
        --workflow examples.payments.workflow:PaymentsWorkflow \
        --input '{"customer": "acme", "invoices": ["inv-1", "inv-2", "inv-3"]}' \
        --observe examples.payments.observe:payments_of
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from examples.payments.activities import PaymentActivities, create_tables
from examples.payments.workflow import PaymentsWorkflow
from infra.db import ensure_database_url, open_pool


async def _worker(client: Client, task_queue: str, *, key_charges: bool) -> Worker:
    pool = await open_pool(ensure_database_url())
    async with pool.connection() as conn:
        await create_tables(conn)
    activities = PaymentActivities(pool, key_charges=key_charges)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[PaymentsWorkflow],
        activities=[activities.look_up_invoices, activities.charge, activities.send_receipt],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    """Every charge keyed by `{workflow_id}:{activity_id}`: a retried charge finds the first."""
    return await _worker(client, task_queue, key_charges=True)


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    """Charges without a key: a charge retried after a crash charges the customer again."""
    return await _worker(client, task_queue, key_charges=False)
