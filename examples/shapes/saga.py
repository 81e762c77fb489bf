"""A saga, as Temporal's `saga` sample opens an account: add the address, add the client, then
add the bank account — which fails on every attempt until its schedule-to-close window closes —
and, once it has failed for good, undo what was done in reverse order and fail the run.

The bank account never has an effect to repeat: crashtest's kill "after its effect" comes at its
last failed attempt (the one no attempt follows: the next would start past the window), before
the failure is reported, and production then waits out the attempt's timeout and fails it all
the same. The compensations are effects like any other: unkeyed, each repeats after a kill."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from psycopg_pool import AsyncConnectionPool
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.ledger import record, workflow_key

# As the sample's `longRunningActivity` (4 s to start-to-close, 8 s to schedule-to-close): every
# attempt fails at once, the retries wait 0.2 s, then 1.6 s; the one after the third attempt
# (at about 1.8 s) would start 12.8 s later, past the window: for good, with seconds to spare
# either way on a loaded machine.
BANK_START_TO_CLOSE = timedelta(seconds=4)
BANK_WINDOW = timedelta(seconds=8)
BANK_RETRIES = RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=8)


class AccountActivities:
    def __init__(self, pool: AsyncConnectionPool, keyed: bool) -> None:
        self.pool, self.keyed = pool, keyed

    async def _record(self, what: str) -> None:
        await record(self.pool, what, workflow_key() if self.keyed else None)

    @activity.defn
    async def add_address(self, account: str) -> None:
        await self._record(f"address of {account}")

    @activity.defn
    async def add_client(self, account: str) -> None:
        await self._record(f"client of {account}")

    @activity.defn
    async def add_bank_account(self, account: str) -> None:
        raise ApplicationError(f"add bank account failed for {account}")

    @activity.defn
    async def undo(self, what: str) -> None:
        await self._record(f"undo {what}")


@workflow.defn
class OpenAccount:
    @workflow.run
    async def run(self, account: str) -> None:
        done: list[str] = []
        try:
            await workflow.execute_activity_method(
                AccountActivities.add_address, account, **OPTIONS
            )
            done.insert(0, f"address of {account}")
            await workflow.execute_activity_method(AccountActivities.add_client, account, **OPTIONS)
            done.insert(0, f"client of {account}")
            await workflow.execute_activity_method(
                AccountActivities.add_bank_account,
                account,
                start_to_close_timeout=BANK_START_TO_CLOSE,
                schedule_to_close_timeout=BANK_WINDOW,
                retry_policy=BANK_RETRIES,
            )
        except ActivityError:
            for what in done:  # compensate, in reverse order
                await workflow.execute_activity_method(AccountActivities.undo, what, **OPTIONS)
            raise


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client,
        task_queue,
        [OpenAccount],
        lambda pool: _activities(AccountActivities(pool, keyed=True)),
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client,
        task_queue,
        [OpenAccount],
        lambda pool: _activities(AccountActivities(pool, keyed=False)),
    )


def _activities(acts: AccountActivities) -> list[Callable[..., Any]]:
    return [acts.add_address, acts.add_client, acts.add_bank_account, acts.undo]
