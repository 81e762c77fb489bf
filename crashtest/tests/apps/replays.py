"""A workflow that schedules `step` when it first runs and `other` when replayed by another
process (a module passed through the sandbox remembers, in a file, that it ran)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

# Passed through: it must keep its memory (a file) outside the sandbox's fresh import.
with workflow.unsafe.imports_passed_through():
    import first_time


@activity.defn
async def step() -> None: ...


@activity.defn
async def other() -> None: ...


@workflow.defn
class ReplaysDifferently:
    @workflow.run
    async def run(self, folder: str) -> None:
        first = first_time.first_time(Path(folder) / workflow.info().workflow_id)
        await workflow.execute_activity(
            step if first else other,
            heartbeat_timeout=timedelta(seconds=2),
            start_to_close_timeout=timedelta(seconds=10),
        )


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[ReplaysDifferently],
        activities=[step, other],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )


def build_without_it(client: Client, task_queue: str) -> Worker:
    return Worker(client, task_queue=task_queue, workflows=[], activities=[step])


def observe(workflow_id: str) -> None:
    return None
