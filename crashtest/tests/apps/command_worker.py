"""A worker run as a command, as a worker of any SDK would be: it reads the server's address and
its task queue from the environment (TEMPORAL_ADDRESS, TEMPORAL_TASK_QUEUE) and polls until it
is killed. Its workflow writes two notes (notes_app's activity: keyed with NOTES_KEYED=1);
`NotesInATree` writes one from a child workflow and one from the run it continues as. The same
worker as crashtest builds it in process: `build`."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from notes_app import notes_file, write_note


@activity.defn
async def write_note_in(file: str, text: str) -> None:
    """notes_app's `write_note`, into the notes of the run `file` (a child's note in its
    root's), keyed by the workflow that writes it."""
    info = activity.info()
    path, key = notes_file(file), f"{info.workflow_id}:{info.activity_id}"
    if os.environ.get("NOTES_KEYED") and path.exists() and key in path.read_text():
        return
    with path.open("a") as notes:
        notes.write(f"{key} {text}\n")


@workflow.defn
class TwoNotes:
    @workflow.run
    async def run(self, texts: list[str]) -> int:
        for text in texts:
            await workflow.execute_activity(
                write_note, text, start_to_close_timeout=timedelta(seconds=2)
            )
        return len(texts)


@workflow.defn
class OneNote:
    @workflow.run
    async def run(self, file: str, text: str) -> None:
        await workflow.execute_activity(
            write_note_in, args=[file, text], start_to_close_timeout=timedelta(seconds=2)
        )


@workflow.defn
class NotesInATree:
    """The first note from a child workflow, the rest from the run this one continues as: a
    crash point in a child, and one in a later run of the chain."""

    @workflow.run
    async def run(self, texts: list[str]) -> int:
        root = workflow.info().workflow_id  # each note lands in the root's notes
        if len(texts) > 1:
            await workflow.execute_child_workflow(OneNote.run, args=[root, texts[0]])
            workflow.continue_as_new(texts[1:])
        for text in texts:
            await workflow.execute_activity(
                write_note_in, args=[root, text], start_to_close_timeout=timedelta(seconds=2)
            )
        return len(texts)


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[TwoNotes, NotesInATree, OneNote],
        activities=[write_note, write_note_in],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )


async def main() -> None:
    client = await Client.connect(os.environ["TEMPORAL_ADDRESS"])
    await build(client, os.environ["TEMPORAL_TASK_QUEUE"]).run()


if __name__ == "__main__":
    asyncio.run(main())
