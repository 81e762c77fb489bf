"""An activity no retry follows (`maximum_attempts=1`) with a 5-minute start-to-close timeout and
no heartbeat: a worker killed after its charge leaves an attempt that only its timeout ends, and
then the activity fails in the workflow. crashtest does not wait the 5 minutes: the cell ends at
once, ✗, with what production will see ("no retry follows the killed attempt of charge (attempt
1 of at most 1): the activity fails in the workflow when its start-to-close timeout 300 s
expires"). Keys cannot help here; retries can.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import shape_worker
    from examples.shapes.charges import ChargeActivities
    from examples.shapes.ledger import workflow_key


@workflow.defn
class ChargeOnce:
    @workflow.run
    async def run(self, invoice: str) -> str:
        return await workflow.execute_activity_method(
            ChargeActivities.charge,
            invoice,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client,
        task_queue,
        [ChargeOnce],
        lambda p: ChargeActivities(p, charge_key=workflow_key, receipt_key=workflow_key).all(),
    )
