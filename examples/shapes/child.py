"""An effect in a child workflow: the parent starts `ChargeChild`, which charges, then the parent
sends the receipt. The child's id is derived from the parent's (`{parent}/charge`), so its effects
can be found from the root's workflow id (a default child id is random)."""

from __future__ import annotations

from collections.abc import Callable
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


class ChildActivities:
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
class ChargeChild:
    @workflow.run
    async def run(self, invoice: str) -> str:
        return await workflow.execute_activity_method(ChildActivities.charge, invoice, **OPTIONS)


@workflow.defn
class ChargeInChild:
    @workflow.run
    async def run(self, invoice: str) -> None:
        await workflow.execute_child_workflow(
            ChargeChild.run, invoice, id=f"{workflow.info().workflow_id}/charge"
        )
        await workflow.execute_activity_method(ChildActivities.send_receipt, invoice, **OPTIONS)


WORKFLOWS = [ChargeInChild, ChargeChild]


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client, task_queue, WORKFLOWS, lambda p: ChildActivities(p, keyed=True).all()
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client, task_queue, WORKFLOWS, lambda p: ChildActivities(p, keyed=False).all()
    )
