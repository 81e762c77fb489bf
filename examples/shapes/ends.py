"""Runs that end other than completed, by design: crashtest takes the reference's end as part of
the state, and every crash point must end the same way.

- `DeclinedCharge` charges, then its fraud check refuses the payment (a non-retryable failure):
  the run ends failed, `FraudSuspected`, after its one charge.
- `CancelledOrder` charges, then waits for its shipment; its driver (`cancel_after_the_charge`,
  given to crashtest as `--drive`) cancels it once the charge is recorded: the run ends
  cancelled, after its one charge.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.charges import ChargeActivities
    from examples.shapes.ledger import workflow_key


@activity.defn
async def check_fraud(invoice: str) -> None:
    raise ApplicationError(f"{invoice}: fraud suspected", type="FraudSuspected", non_retryable=True)


@workflow.defn
class DeclinedCharge:
    @workflow.run
    async def run(self, invoice: str) -> None:
        await workflow.execute_activity_method(ChargeActivities.charge, invoice, **OPTIONS)
        await workflow.execute_activity(check_fraud, invoice, **OPTIONS)


@workflow.defn
class CancelledOrder:
    @workflow.run
    async def run(self, invoice: str) -> None:
        await workflow.execute_activity_method(ChargeActivities.charge, invoice, **OPTIONS)
        await workflow.wait_condition(lambda: False)  # the shipment that never comes


async def cancel_after_the_charge(handle: WorkflowHandle[Any, Any]) -> None:
    """crashtest's DRIVE: cancel the run once the workflow has taken its charge's result (the
    workflow task after the charge completed), as a person would, later."""
    while True:
        kinds = [e.event_type for e in (await handle.fetch_history()).events]
        if EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED in kinds:
            after = kinds[kinds.index(EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) :]
            if EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED in after:
                await handle.cancel()
                return
        await asyncio.sleep(0.2)


async def _worker(client: Client, task_queue: str, keyed: bool) -> Worker:
    key = workflow_key if keyed else None
    return await shape_worker(
        client,
        task_queue,
        [DeclinedCharge, CancelledOrder],
        lambda pool: [ChargeActivities(pool, charge_key=key, receipt_key=key).charge, check_fraud],
    )


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await _worker(client, task_queue, keyed=True)


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await _worker(client, task_queue, keyed=False)
