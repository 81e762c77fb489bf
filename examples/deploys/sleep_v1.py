"""`Reminder`, version 1: create the account, sleep a week, send the reminder (time skipping:
the week takes no real time)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from examples.deploys.sleep import REMINDER, reminder_worker
    from examples.shapes.build import OPTIONS
    from examples.shapes.waits import A_WEEK, WaitingActivities


@workflow.defn(name=REMINDER)
class Order:
    @workflow.run
    async def run(self, user: str) -> None:
        await workflow.execute_activity_method(WaitingActivities.create_account, user, **OPTIONS)
        await workflow.sleep(A_WEEK)
        await workflow.execute_activity_method(WaitingActivities.send_reminder, user, **OPTIONS)


async def worker(client: Client, task_queue: str) -> Worker:
    return await reminder_worker(client, task_queue, Order)
