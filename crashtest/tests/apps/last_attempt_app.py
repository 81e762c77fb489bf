"""samples-python's `custom_decorator`, with an effect: an activity that may run once
(`maximum_attempts=1`, a heartbeat timeout) writes its note, keyed (a committed row in sqlite),
then heartbeats a while and returns. A kill after the note leaves no attempt to follow: nothing
is written twice, yet the activity times out and the run fails — what its note must say."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker


def _db() -> sqlite3.Connection:
    conn = sqlite3.connect(os.path.join(os.environ["NOTES_DIR"], "once.db"))
    conn.execute("create table if not exists notes (workflow_id text, key text unique)")
    return conn


@activity.defn
async def note_once(text: str) -> str:
    info = activity.info()
    with _db() as conn:
        conn.execute(
            "insert or ignore into notes values (?, ?)",
            (info.workflow_id, f"{info.workflow_id}:{info.activity_id}"),
        )
    for _ in range(2):
        activity.heartbeat()
        await asyncio.sleep(0.2)
    return "noted"


@workflow.defn
class NoteOnce:
    @workflow.run
    async def run(self, text: str) -> str:
        return await workflow.execute_activity(
            note_once,
            text,
            start_to_close_timeout=timedelta(hours=1),
            heartbeat_timeout=timedelta(seconds=2),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[NoteOnce],
        activities=[note_once],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )


def notes_of(workflow_id: str) -> int:
    with _db() as conn:
        row = conn.execute("select count(*) from notes where workflow_id = ?", (workflow_id,))
        return int(row.fetchone()[0])
