"""A workflow whose path depends on the world: `decide` says whether to send a welcome, and only
the first run anywhere gets one (a flag file in NOTES_DIR). The run without a crash sends it;
every later run takes the other path, so a crash point at the welcome is never reached again —
no verdict, listed as not tested."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker


@activity.defn
async def decide() -> bool:
    flag = Path(os.environ["NOTES_DIR"]) / "welcomed"
    first = not flag.exists()
    flag.touch()
    return first


@activity.defn
async def welcome(name: str) -> None:
    pass


@activity.defn
async def greet(name: str) -> None:
    pass


@workflow.defn
class MaybeWelcome:
    @workflow.run
    async def run(self, name: str) -> None:
        timeout = timedelta(seconds=30)
        if await workflow.execute_activity(decide, start_to_close_timeout=timeout):
            await workflow.execute_activity(welcome, name, start_to_close_timeout=timeout)
        await workflow.execute_activity(greet, name, start_to_close_timeout=timeout)


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[MaybeWelcome],
        activities=[decide, welcome, greet],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )


def observe(workflow_id: str) -> str:
    return "greeted"
