"""What an operator's reset repeats: charge, then send a receipt; crash-tested with `reset:N`
points (the run completes, is reset to before boundary N, and runs on from there).

A reset starts a new run of the same workflow id: keys made of the run id are new after it, so
the charge is taken again; keys made of the workflow id find the first one.
"""

from __future__ import annotations

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The activities' side (Postgres, the project's settings) is not workflow code: the sandbox
# passes it through instead of importing it again for every run.
with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.charges import ChargeActivities
    from examples.shapes.ledger import workflow_key


def run_key() -> str:
    info = activity.info()
    return f"{info.workflow_run_id}:{info.activity_id}"


@workflow.defn
class ChargeAndReceipt:
    @workflow.run
    async def run(self, invoice: str) -> None:
        await workflow.execute_activity_method(ChargeActivities.charge, invoice, **OPTIONS)
        await workflow.execute_activity_method(ChargeActivities.send_receipt, invoice, **OPTIONS)


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    """Workflow-id keys: a reset finds the effects of the run it replaced."""
    return await shape_worker(
        client,
        task_queue,
        [ChargeAndReceipt],
        lambda p: ChargeActivities(p, charge_key=workflow_key, receipt_key=workflow_key).all(),
    )


async def run_keyed_worker(client: Client, task_queue: str) -> Worker:
    """Run-id keys: new after a reset, so everything after the reset point happens again."""
    return await shape_worker(
        client,
        task_queue,
        [ChargeAndReceipt],
        lambda p: ChargeActivities(p, charge_key=run_key, receipt_key=run_key).all(),
    )
