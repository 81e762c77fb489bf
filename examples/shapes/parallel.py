"""Effects in parallel activities: charge every invoice at once, then send one receipt.

The payment API answers the k-th charge after 2(k-1) seconds, so a kill after one charge's effect or
checkpoint finds the later ones still in flight (waiting, not yet charged): they die with the
worker, as they would in production, and run again on the fresh one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The activities' side (Postgres, the project's settings) is not workflow code: the sandbox
# passes it through instead of importing it again for every run.
with workflow.unsafe.imports_passed_through():
    from psycopg_pool import AsyncConnectionPool

    from examples.shapes.build import OPTIONS, answer_after, shape_worker
    from examples.shapes.ledger import record, workflow_key

SPACING_S = 2.0


@dataclass
class Charge:
    invoice: str
    answer_after_s: float


class ParallelActivities:
    def __init__(self, pool: AsyncConnectionPool, *, keyed: bool) -> None:
        self.pool = pool
        self.keyed = keyed

    @activity.defn
    async def charge(self, charge: Charge) -> str:
        await answer_after(charge.answer_after_s)
        await record(self.pool, f"charge {charge.invoice}", workflow_key() if self.keyed else None)
        return charge.invoice

    @activity.defn
    async def send_receipt(self, invoices: list[str]) -> None:
        await record(self.pool, f"receipt for {', '.join(invoices)}", workflow_key())

    def all(self) -> list[Callable[..., Any]]:
        return [self.charge, self.send_receipt]


@workflow.defn
class ParallelCharges:
    @workflow.run
    async def run(self, invoices: list[str]) -> None:
        charged = await asyncio.gather(
            *(
                workflow.execute_activity_method(
                    ParallelActivities.charge, Charge(invoice, k * SPACING_S), **OPTIONS
                )
                for k, invoice in enumerate(invoices)
            )
        )
        await workflow.execute_activity_method(
            ParallelActivities.send_receipt, list(charged), **OPTIONS
        )


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    """Every charge keyed by `{workflow_id}:{activity_id}`."""
    return await shape_worker(
        client, task_queue, [ParallelCharges], lambda p: ParallelActivities(p, keyed=True).all()
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    """Charges without a key (the receipt keeps its key)."""
    return await shape_worker(
        client, task_queue, [ParallelCharges], lambda p: ParallelActivities(p, keyed=False).all()
    )
