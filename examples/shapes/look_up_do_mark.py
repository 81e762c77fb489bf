"""Look it up, do it, mark it done: the most common way an activity is made "idempotent", and why
a mark is not enough.

`place_order` looks its key up among the orders it marked done, places the order (a committed
insert), then marks the key done. A worker killed between the order and the mark leaves no mark:
the retried attempt finds none and orders again. crashtest kills there (`effect:1.1`, after the
order's commit), inside the activity; its boundaries alone (after it returned, after the server
recorded it) see nothing wrong. Three workers:

- `unkeyed_worker`: the order has no key: killed between the order and the mark, it is placed
  twice (✗ at effect:1.1);
- `keyed_worker`: the order carries the key, which the ledger refuses twice (✓);
- `one_transaction_worker`: the order and its mark commit in one transaction (✓).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.ledger import record_on, workflow_key


class OrderActivities:
    def __init__(self, pool: AsyncConnectionPool, how: str) -> None:
        self.pool, self.how = pool, how

    async def _marked(self, conn: psycopg.AsyncConnection, key: str) -> bool:
        found = await conn.execute("select 1 from example_marks where idempotency_key = %s", (key,))
        return await found.fetchone() is not None

    @activity.defn
    async def place_order(self, item: str) -> str:
        key = workflow_key()
        async with self.pool.connection() as conn:
            await conn.set_autocommit(True)
            if await self._marked(conn, key):
                return "placed already"
            if self.how == "one transaction":
                async with conn.transaction():
                    await record_on(conn, f"order {item}", None)
                    await conn.execute("insert into example_marks values (%s)", (key,))
                return "placed"
            await record_on(conn, f"order {item}", key if self.how == "keyed" else None)
            await conn.execute("insert into example_marks values (%s)", (key,))
        return "placed"

    @activity.defn
    async def send_receipt(self, item: str) -> None:
        async with self.pool.connection() as conn:
            await record_on(conn, f"receipt {item}", workflow_key())

    def all(self) -> list[Callable[..., Any]]:
        return [self.place_order, self.send_receipt]


@workflow.defn
class LookUpDoMark:
    @workflow.run
    async def run(self, item: str) -> str:
        placed = await workflow.execute_activity_method(
            OrderActivities.place_order, item, **OPTIONS
        )
        await workflow.execute_activity_method(OrderActivities.send_receipt, item, **OPTIONS)
        return placed


async def _worker(client: Client, task_queue: str, how: str) -> Worker:
    return await shape_worker(
        client, task_queue, [LookUpDoMark], lambda pool: OrderActivities(pool, how).all()
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await _worker(client, task_queue, "unkeyed")


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await _worker(client, task_queue, "keyed")


async def one_transaction_worker(client: Client, task_queue: str) -> Worker:
    return await _worker(client, task_queue, "one transaction")
