"""A side effect in workflow code: the mistake only a kill inside a workflow task finds.

`NoticeInWorkflowCode` writes a notice straight from workflow code, guarded by `not
is_replaying()` as if that made it once, then charges. A worker killed after that workflow code
ran and before the task's commands reached the server (`in-task:1`) leaves the task to be run
again by the next worker, which is not replaying it: the notice is written twice. A kill after an
effect or a checkpoint never finds it (the task that wrote it had completed, and a replay skips
it). `NoticeInAnActivity` sends the notice from an activity, with a key, and passes. (Workflow
code that writes to a database runs outside the sandbox, as code like this usually does.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg_pool import AsyncConnectionPool
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

with workflow.unsafe.imports_passed_through():
    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.charges import ChargeActivities
    from examples.shapes.ledger import record_outside_an_activity, workflow_key


@workflow.defn
class NoticeInWorkflowCode:
    @workflow.run
    async def run(self, invoice: str) -> str:
        if not workflow.unsafe.is_replaying():  # not a guard: a task run again is not a replay
            record_outside_an_activity(workflow.info().workflow_id, f"notice for {invoice}")
        return await workflow.execute_activity_method(ChargeActivities.charge, invoice, **OPTIONS)


@workflow.defn
class NoticeInAnActivity:
    @workflow.run
    async def run(self, invoice: str) -> str:
        await workflow.execute_activity_method(ChargeActivities.send_notice, invoice, **OPTIONS)
        return await workflow.execute_activity_method(ChargeActivities.charge, invoice, **OPTIONS)


def _activities(pool: AsyncConnectionPool) -> list[Callable[..., Any]]:
    return ChargeActivities(pool, charge_key=workflow_key, receipt_key=workflow_key).all()


async def build(client: Client, task_queue: str) -> Worker:
    workflows = [NoticeInWorkflowCode, NoticeInAnActivity]
    unsandboxed = UnsandboxedWorkflowRunner()
    return await shape_worker(client, task_queue, workflows, _activities, unsandboxed)
