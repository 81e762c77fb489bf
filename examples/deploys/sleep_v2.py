"""`Reminder`, version 2, done wrong: a welcome inserted before the week's sleep, without a
patch. A run that fell asleep on v1 wakes on v2, which replays v1's history and schedules the
welcome where v1 started the timer: a nondeterminism error, the run blocked. One killed before
it slept takes v2's path."""

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
        await workflow.execute_activity_method(WaitingActivities.send_welcome, user, **OPTIONS)
        await workflow.sleep(A_WEEK)
        await workflow.execute_activity_method(WaitingActivities.send_reminder, user, **OPTIONS)


async def worker(client: Client, task_queue: str) -> Worker:
    return await reminder_worker(client, task_queue, Order)
