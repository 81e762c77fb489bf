"""An activity whose first attempt outruns its heartbeat timeout (it never heartbeats, and waits
until the server has begun attempt 2), so attempt 2 begins while attempt 1 still runs; attempt 2
is refused, attempt 3 writes after attempt 1 does: the run without a crash leaves two notes.
The history keeps only the last attempt's failure (attempt 2's refusal), so nothing in it says a
timeout ended attempt 1: only the worker, which still ran it, can."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from notes_app import notes_file, notes_of

__all__ = ["OverrunWorkflow", "build", "notes_of"]


@activity.defn
async def slow_note(text: str) -> None:
    info = activity.info()
    notes = notes_file(info.workflow_id or "")
    begun = notes.with_suffix(".attempt-2")
    if info.attempt == 1:  # no heartbeat until the server has begun attempt 2, whatever the load
        await _until(begun.exists)
    elif info.attempt == 2:
        begun.touch()
        raise ApplicationError("refused: try again")
    else:  # attempt 1 writes first
        await _until(notes.exists)
    with notes.open("a") as file:
        file.write(f"{info.workflow_id}:{info.activity_id} {text}\n")


async def _until(done: Callable[[], bool]) -> None:
    for _ in range(600):
        if done():
            return
        await asyncio.sleep(0.05)
    raise ApplicationError("waited 30 s", non_retryable=True)


@workflow.defn
class OverrunWorkflow:
    @workflow.run
    async def run(self, text: str) -> None:
        await workflow.execute_activity(
            slow_note,
            text,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100)),
        )


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[OverrunWorkflow],
        activities=[slow_note],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
