"""An effect in a child workflow: the parent starts `ChargeChild`, which charges, then the parent
sends the receipt. The child's id is derived from the parent's (`{parent}/charge`), so its effects
can be found from the root's workflow id (a default child id is random)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The activities' side (Postgres, the project's settings) is not workflow code: the sandbox
# passes it through instead of importing it again for every run.
with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.charges import ChargeActivities
    from examples.shapes.ledger import workflow_key


@workflow.defn
class ChargeChild:
    @workflow.run
    async def run(self, invoice: str) -> str:
        return await workflow.execute_activity_method(ChargeActivities.charge, invoice, **OPTIONS)


@workflow.defn
class ChargeInChild:
    @workflow.run
    async def run(self, invoice: str) -> None:
        await workflow.execute_child_workflow(
            ChargeChild.run, invoice, id=f"{workflow.info().workflow_id}/charge"
        )
        await workflow.execute_activity_method(ChargeActivities.send_receipt, invoice, **OPTIONS)


WORKFLOWS = [ChargeInChild, ChargeChild]


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client,
        task_queue,
        WORKFLOWS,
        lambda p: ChargeActivities(p, charge_key=workflow_key, receipt_key=workflow_key).all(),
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client,
        task_queue,
        WORKFLOWS,
        lambda p: ChargeActivities(p, charge_key=None, receipt_key=workflow_key).all(),
    )
