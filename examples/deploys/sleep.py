"""What the versions of `Reminder` share (`sleep_v1`, `sleep_v2`, `sleep_v2_patched`): the
workflow's name, and a worker of the waits' activities, keyed, so that only the deploy's own
hazard shows."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.worker import Worker

from examples.shapes.build import shape_worker
from examples.shapes.waits import WaitingActivities

REMINDER = "Reminder"


async def reminder_worker(client: Client, task_queue: str, workflow: type) -> Worker:
    return await shape_worker(
        client, task_queue, [workflow], lambda pool: WaitingActivities(pool, keyed=True).all()
    )
