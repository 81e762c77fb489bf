"""Two patterns that lean on Temporal's retries, crash-tested like any other shape:

- **Poll by retry** (the infrequent-polling pattern): `wait_until_ready` fails "not ready yet"
  until the invoice is ready, and its retry policy, with no attempt limit and no backoff, is the
  polling loop.
- **Retry until success**: `charge_when_up` meets a payment service that is down for its first
  attempts, then charges, once per key.

Readiness comes from the attempt number, which the server keeps: a worker that takes over after
a kill sees the same attempt count, so it answers as the killed one would have.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from psycopg_pool import AsyncConnectionPool
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.charges import Key
    from examples.shapes.ledger import record, workflow_key

READY_AT_ATTEMPT = 4  # the invoice is ready, and the payment service up, from this attempt on
POLLING = RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=1.0)
# Room for the attempts a kill, or a late heartbeat on a loaded machine, adds after the down ones.
UNTIL_UP = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_attempts=READY_AT_ATTEMPT + 6
)


class RetryingActivities:
    def __init__(self, pool: AsyncConnectionPool, key: Key) -> None:
        self.pool = pool
        self.key = key

    @activity.defn
    async def wait_until_ready(self, invoice: str) -> str:
        if activity.info().attempt < READY_AT_ATTEMPT:
            raise ApplicationError(f"{invoice} is not ready yet")
        return invoice

    @activity.defn
    async def charge_when_up(self, invoice: str) -> str:
        if activity.info().attempt < READY_AT_ATTEMPT:
            raise ApplicationError("the payment service is down (503)")
        await record(self.pool, f"charge {invoice}", self.key and self.key())
        return invoice


@workflow.defn
class PollThenCharge:
    @workflow.run
    async def run(self, invoice: str) -> str:
        ready = await workflow.execute_activity_method(
            RetryingActivities.wait_until_ready,
            invoice,
            start_to_close_timeout=OPTIONS["start_to_close_timeout"],
            heartbeat_timeout=OPTIONS["heartbeat_timeout"],
            retry_policy=POLLING,  # no attempt limit: the retries are the polling loop
        )
        return await workflow.execute_activity_method(
            RetryingActivities.charge_when_up,
            ready,
            start_to_close_timeout=OPTIONS["start_to_close_timeout"],
            heartbeat_timeout=OPTIONS["heartbeat_timeout"],
            retry_policy=UNTIL_UP,
        )


def _activities(key: Key) -> Callable[[AsyncConnectionPool], list[Callable[..., Any]]]:
    def made(pool: AsyncConnectionPool) -> list[Callable[..., Any]]:
        activities = RetryingActivities(pool, key)
        return [activities.wait_until_ready, activities.charge_when_up]

    return made


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(client, task_queue, [PollThenCharge], _activities(workflow_key))


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(client, task_queue, [PollThenCharge], _activities(None))
