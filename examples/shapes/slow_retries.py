"""Charges one after another, each retried 5 s after a failed attempt (an API that asks callers
to wait): a kill after a charge's effect costs its run the 5 s. Grouping kills in one run adds
those waits up, so the crash test sizes its groups from the retry policy the history records
(the bench's and the guide's measure of grouped against `--exact`)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import OPTIONS, ActivityOptions, shape_worker
    from examples.shapes.charges import ChargeActivities
    from examples.shapes.ledger import workflow_key

RETRY_AFTER = timedelta(seconds=5)
SLOW_RETRIES = ActivityOptions(
    start_to_close_timeout=OPTIONS["start_to_close_timeout"],
    heartbeat_timeout=OPTIONS["heartbeat_timeout"],
    retry_policy=RetryPolicy(initial_interval=RETRY_AFTER),
)


@workflow.defn
class ChargeEachRetryingSlowly:
    @workflow.run
    async def run(self, invoices: int) -> int:
        for n in range(1, invoices + 1):
            await workflow.execute_activity_method(
                ChargeActivities.charge, f"inv-{n}", **SLOW_RETRIES
            )
        return invoices


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client,
        task_queue,
        [ChargeEachRetryingSlowly],
        lambda p: ChargeActivities(p, charge_key=workflow_key, receipt_key=workflow_key).all(),
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client,
        task_queue,
        [ChargeEachRetryingSlowly],
        lambda p: ChargeActivities(p, charge_key=None, receipt_key=workflow_key).all(),
    )
