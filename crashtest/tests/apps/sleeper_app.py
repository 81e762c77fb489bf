"""A workflow that notes one line, then sleeps an hour (a `workflow.sleep` left in from
production): the crash test cannot wait for it, and must say it is a timer it waits on."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from notes_app import write_note


@workflow.defn
class SleepsAnHour:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(
            write_note, "before the sleep", start_to_close_timeout=timedelta(seconds=10)
        )
        await workflow.sleep(timedelta(hours=1))


def build(client: Client, task_queue: str) -> Worker:
    return Worker(client, task_queue=task_queue, workflows=[SleepsAnHour], activities=[write_note])
