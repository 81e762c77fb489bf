"""A tiny app that knows nothing of this repository: each activity appends a line to a file (an
effect outside any database); with NOTES_KEYED=1 it first looks for its key there. The tool's
tests crash-test it through the CLI, the pytest plugin and a fresh install."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker


def notes_file(workflow_id: str) -> Path:
    return Path(os.environ["NOTES_DIR"]) / f"{workflow_id}.txt"


@activity.defn
async def write_note(text: str) -> None:
    info = activity.info()
    workflow_id = info.workflow_id or ""  # an activity started by a workflow has one
    path, key = notes_file(workflow_id), f"{workflow_id}:{info.activity_id}"
    if os.environ.get("NOTES_KEYED") and path.exists() and key in path.read_text():
        return
    with path.open("a") as notes:
        notes.write(f"{key} {text}\n")


@workflow.defn
class NotesWorkflow:
    @workflow.run
    async def run(self, texts: list[str]) -> int:
        for text in texts:
            await workflow.execute_activity(
                write_note,
                text,
                start_to_close_timeout=timedelta(seconds=30),
                heartbeat_timeout=timedelta(seconds=2),
            )
        return len(texts)


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[NotesWorkflow],
        activities=[write_note],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )


def notes_of(workflow_id: str) -> list[str]:
    path = notes_file(workflow_id)
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.split(" ", 1)[1] for line in lines]
