"""Temporal's `hello_async_activity_completion`, with an effect: the activity hands its completion
to a task and returns at once (`activity.raise_complete_async()`); the task writes the greeting
(a committed row in sqlite: a crash point inside the activity) and then completes the activity
through the worker's client, by task token (ASYNC_BY=id: by workflow id and activity id;
ASYNC_BY=elsewhere: through a client of its own, which crashtest does not see). NOTES_KEYED=1:
the greeting is written once per `workflow id:activity id`."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker


def _db() -> sqlite3.Connection:
    conn = sqlite3.connect(os.path.join(os.environ["NOTES_DIR"], "greetings.db"))
    conn.execute("create table if not exists greetings (workflow_id text, key text, text text)")
    return conn


class Composer:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.tasks: set[asyncio.Task[None]] = set()

    @activity.defn
    async def compose_greeting(self, name: str) -> str:
        info = activity.info()
        task = asyncio.create_task(self.complete(info, name))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        activity.raise_complete_async()

    async def complete(self, info: activity.Info, name: str) -> None:
        how = os.environ.get("ASYNC_BY", "token")
        client = self.client
        if how == "elsewhere":
            client = await Client.connect(
                os.environ["TEMPORAL_ADDRESS"], namespace=self.client.namespace
            )
        if how == "token":
            handle = client.get_async_activity_handle(task_token=info.task_token)
        else:
            handle = client.get_async_activity_handle(
                workflow_id=info.workflow_id or "",
                run_id=info.workflow_run_id,
                activity_id=info.activity_id,
            )
        await handle.heartbeat()
        workflow_id = info.workflow_id or ""
        key = f"{workflow_id}:{info.activity_id}"
        with _db() as conn:
            found = conn.execute("select 1 from greetings where key = ?", (key,)).fetchone()
            if not (os.environ.get("NOTES_KEYED") and found):
                conn.execute("insert into greetings values (?, ?, ?)", (workflow_id, key, name))
        await handle.complete(f"Hello, {name}!")


@workflow.defn
class Greetings:
    @workflow.run
    async def run(self, names: list[str]) -> list[str]:
        return [
            await workflow.execute_activity_method(
                Composer.compose_greeting,
                name,
                start_to_close_timeout=timedelta(seconds=30),
                heartbeat_timeout=timedelta(seconds=2),
            )
            for name in names
        ]


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[Greetings],
        activities=[Composer(client).compose_greeting],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )


def greetings_of(workflow_id: str) -> list[str]:
    with _db() as conn:
        rows = conn.execute("select text from greetings where workflow_id = ?", (workflow_id,))
        return [row[0] for row in rows]
