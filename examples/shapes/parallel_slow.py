"""Parallel activities with long timeouts and no heartbeat: the case where a killed worker holds
more than the attempt it died in.

Three charges start at once and answer together, after half a second; their activities have a
5-minute start-to-close timeout and no heartbeat timeout, as many samples have. A worker killed
right after one charge returns holds its siblings too — running, or returned with their
completion not yet sent — and in production each would wait out its 5 minutes. crashtest finds
them from the server (the pending activities last started by the dead worker) and fails them at
once, to be retried; the table names them under "in flight at the kill".
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from psycopg_pool import AsyncConnectionPool

    from examples.shapes.build import shape_worker
    from examples.shapes.ledger import record, workflow_key

ANSWER_AFTER_S = 0.5
CHARGE_TIMEOUT = timedelta(minutes=5)
SLOW = {
    "start_to_close_timeout": CHARGE_TIMEOUT,
    "retry_policy": RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
}


class SlowCharges:
    def __init__(self, pool: AsyncConnectionPool, *, keyed: bool) -> None:
        self.pool = pool
        self.keyed = keyed

    @activity.defn
    async def charge(self, invoice: str) -> str:
        await asyncio.sleep(ANSWER_AFTER_S)  # a slow payment API; no heartbeat
        await record(self.pool, f"charge {invoice}", workflow_key() if self.keyed else None)
        return invoice


@workflow.defn
class ParallelSlowCharges:
    @workflow.run
    async def run(self, invoices: list[str]) -> list[str]:
        return list(
            await asyncio.gather(
                *(
                    workflow.execute_activity_method(SlowCharges.charge, invoice, **SLOW)  # type: ignore[call-overload]
                    for invoice in invoices
                )
            )
        )


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client, task_queue, [ParallelSlowCharges], lambda p: [SlowCharges(p, keyed=True).charge]
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client, task_queue, [ParallelSlowCharges], lambda p: [SlowCharges(p, keyed=False).charge]
    )
