"""The notes app, whose replay is slow while the machine is "loaded": the file named by
SLOW_REPLAYS holds how many replays are still slow (-1: all), in every worker process; each
blocks for 2.5 s without yielding, as a framework's replay of a long history does on a starved
CPU, and the SDK's deadlock check (2 s) fails the workflow task, again on each retry. A crash
test must run such a cell again once the load is gone and say so, or, if it never goes, fail it
with the deadlock as the cause — never wait out its deadline."""

from __future__ import annotations

import fcntl
import os
import time
from datetime import timedelta

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from notes_app import notes_of, write_note

__all__ = ["SlowReplayWorkflow", "build", "notes_of"]


def _loaded() -> bool:
    """Whether this replay is slow (one fewer is, from now on)."""
    with open(os.environ["SLOW_REPLAYS"], "r+") as left:
        fcntl.flock(left, fcntl.LOCK_EX)
        count = int(left.read() or 0)
        if count > 0:
            left.seek(0)
            left.truncate()
            left.write(str(count - 1))
        return count != 0


@workflow.defn
class SlowReplayWorkflow:
    @workflow.run
    async def run(self, texts: list[str]) -> int:
        if workflow.unsafe.is_replaying():  # a worker that did not run the start (a new one)
            with workflow.unsafe.sandbox_unrestricted():
                if _loaded():
                    time.sleep(2.5)  # noqa: ASYNC251 (a long replay on a starved CPU)
        for text in texts:
            await workflow.execute_activity(
                write_note, text, start_to_close_timeout=timedelta(seconds=30)
            )
        return len(texts)


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[SlowReplayWorkflow],
        activities=[write_note],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
