"""A worker run as a command, as a worker of any SDK would be: it reads the server's address and
its task queue from the environment (TEMPORAL_ADDRESS, TEMPORAL_TASK_QUEUE) and polls until it
is killed. Its workflow writes two notes (notes_app's activity: keyed with NOTES_KEYED=1). The
same worker as crashtest builds it in process: `build`."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from notes_app import write_note


@workflow.defn
class TwoNotes:
    @workflow.run
    async def run(self, texts: list[str]) -> int:
        for text in texts:
            await workflow.execute_activity(
                write_note, text, start_to_close_timeout=timedelta(seconds=2)
            )
        return len(texts)


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[TwoNotes],
        activities=[write_note],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )


async def main() -> None:
    client = await Client.connect(os.environ["TEMPORAL_ADDRESS"])
    await build(client, os.environ["TEMPORAL_TASK_QUEUE"]).run()


if __name__ == "__main__":
    asyncio.run(main())
