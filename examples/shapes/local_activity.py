"""A local activity's effect: charge the card in a local activity, then send a receipt.

A local activity's result becomes durable only when the workflow task that ran it completes (its
marker is recorded then): a worker killed after the charge and before that charges again on the
fresh worker unless the charge carries a key.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The activities' side (Postgres, the project's settings) is not workflow code: the sandbox
# passes it through instead of importing it again for every run.
with workflow.unsafe.imports_passed_through():
    from psycopg_pool import AsyncConnectionPool

    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.ledger import record, workflow_key


class LocalActivities:
    def __init__(self, pool: AsyncConnectionPool, *, keyed: bool) -> None:
        self.pool = pool
        self.keyed = keyed

    @activity.defn
    async def charge(self, invoice: str) -> str:
        await record(self.pool, f"charge {invoice}", workflow_key() if self.keyed else None)
        return invoice

    @activity.defn
    async def send_receipt(self, invoice: str) -> None:
        await record(self.pool, f"receipt for {invoice}", workflow_key())

    def all(self) -> list[Callable[..., Any]]:
        return [self.charge, self.send_receipt]


@workflow.defn
class LocalCharge:
    @workflow.run
    async def run(self, invoice: str) -> None:
        await workflow.execute_local_activity_method(
            LocalActivities.charge, invoice, start_to_close_timeout=timedelta(seconds=5),
            retry_policy=OPTIONS["retry_policy"],
        )  # fmt: skip
        await workflow.execute_activity_method(LocalActivities.send_receipt, invoice, **OPTIONS)


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client, task_queue, [LocalCharge], lambda p: LocalActivities(p, keyed=True).all()
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client, task_queue, [LocalCharge], lambda p: LocalActivities(p, keyed=False).all()
    )
