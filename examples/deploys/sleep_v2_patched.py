"""`Reminder`, version 2, done right: the welcome behind `workflow.patched`. A run that fell
asleep on v1 replays without it and sleeps on; a new run, or one killed before it slept, sends
it."""

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
        if workflow.patched("welcome"):
            await workflow.execute_activity_method(WaitingActivities.send_welcome, user, **OPTIONS)
        await workflow.sleep(A_WEEK)
        await workflow.execute_activity_method(WaitingActivities.send_reminder, user, **OPTIONS)


async def worker(client: Client, task_queue: str) -> Worker:
    return await reminder_worker(client, task_queue, Order)
