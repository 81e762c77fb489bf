"""Two shapes whose activities do not end the way most do, as Temporal users write them:

- `OptionalCheck` charges, asks a fraud service for a second opinion that is allowed to fail
  (`maximum_attempts=1`, inside `try`/`except`: the workflow goes on without it), then sends the
  receipt. A worker killed after that check returned leaves an attempt no retry follows: in
  production its timeout ends it, the workflow catches the failure and goes on to the normal end.
  crashtest ends that attempt at once with the timeout's own failure, so the workflow handles it
  as production's does, and the cell ends in the no-crash state.
- `WatchedCharge` starts an activity that watches stock and heartbeats until its workflow cancels
  it (it never returns, by design), charges meanwhile, then cancels the watcher and sends the
  receipt. The watcher has no moment after an effect and no result to see: both points are in
  "not tested", with why, not ✗ "never reached".
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import HEARTBEAT_S, OPTIONS, shape_worker
    from examples.shapes.charges import ChargeActivities
    from examples.shapes.ledger import workflow_key


@activity.defn
async def second_opinion(invoice: str) -> str:
    """A fraud service's view, nice to have (no effect)."""
    return f"{invoice}: looks fine"


@activity.defn
async def watch_stock(invoice: str) -> None:
    """Heartbeats until its workflow cancels it (then it raises CancelledError: it never
    returns)."""
    while True:
        activity.heartbeat()
        await asyncio.sleep(HEARTBEAT_S)


@workflow.defn
class OptionalCheck:
    @workflow.run
    async def run(self, invoice: str) -> str:
        await workflow.execute_activity_method(ChargeActivities.charge, invoice, **OPTIONS)
        try:
            opinion = await workflow.execute_activity(
                second_opinion,
                invoice,
                start_to_close_timeout=timedelta(minutes=5),
                heartbeat_timeout=timedelta(seconds=2),
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
        except ActivityError:
            opinion = "no second opinion"  # optional: the order goes on without it
        await workflow.execute_activity_method(ChargeActivities.send_receipt, invoice, **OPTIONS)
        return opinion


@workflow.defn
class WatchedCharge:
    @workflow.run
    async def run(self, invoice: str) -> None:
        watcher = workflow.start_activity(watch_stock, invoice, **OPTIONS)
        await workflow.execute_activity_method(ChargeActivities.charge, invoice, **OPTIONS)
        watcher.cancel()
        await workflow.execute_activity_method(ChargeActivities.send_receipt, invoice, **OPTIONS)


async def _worker(client: Client, task_queue: str, keyed: bool) -> Worker:
    key = workflow_key if keyed else None
    return await shape_worker(
        client,
        task_queue,
        [OptionalCheck, WatchedCharge],
        lambda pool: [
            *ChargeActivities(pool, charge_key=key, receipt_key=key).all(),
            second_opinion,
            watch_stock,
        ],
    )


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await _worker(client, task_queue, keyed=True)


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await _worker(client, task_queue, keyed=False)
