"""An activity that sends its effect through a thread: an unkeyed POST with `requests`' sync
API from `loop.run_in_executor` (as most code that calls a sync library from an async activity
does). Nothing need listen at NOTIFY_URL: the POST is an effect once it is sent. The HTTP
observer must see it, or the repeat after a kill is a silent ✓."""

from __future__ import annotations

import asyncio
import contextlib
import os
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker


def post(text: str) -> None:
    import httpx  # here, not at the top: the workflow sandbox re-imports this module

    with contextlib.suppress(httpx.HTTPError), httpx.Client(timeout=2) as client:
        client.post(os.environ["NOTIFY_URL"], content=text.encode())


@activity.defn
async def notify(text: str) -> None:
    await asyncio.get_running_loop().run_in_executor(None, post, text)


@workflow.defn
class NotifyWorkflow:
    @workflow.run
    async def run(self, texts: list[str]) -> int:
        for text in texts:
            await workflow.execute_activity(
                notify, text, start_to_close_timeout=timedelta(seconds=30)
            )
        return len(texts)


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[NotifyWorkflow],
        activities=[notify],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
