"""A conversation of several turns, driven to its end through kills: the user's messages come as
updates (each reply is an activity: an effect, as a model call is), the run answers a query with
the turns it has taken, and ends on the `end` signal. Its drive, `converse`, is built on
crashtest's helpers, which try again while no worker is up: it waits until the run has taken
the turn before (a message sent too early would be taken out of order), sends the next message
as an update with an id of its own (a second send of a turn the run took returns its reply),
and signals the end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporal_crashtest import send_signal, send_update, wait_until
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from psycopg_pool import AsyncConnectionPool

    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.ledger import record, workflow_key

TURNS = ("a table for four", "friday at eight", "yes, book it")


class ReplyActivities:
    def __init__(self, pool: AsyncConnectionPool, *, keyed: bool) -> None:
        self.pool = pool
        self.keyed = keyed

    @activity.defn
    async def reply(self, turn: str) -> str:
        await record(self.pool, f"reply to {turn}", workflow_key() if self.keyed else None)
        return f"noted: {turn}"

    def all(self) -> list[Callable[..., Any]]:
        return [self.reply]


@workflow.defn
class Conversation:
    def __init__(self) -> None:
        self.turns: list[str] = []
        self.ended = False

    @workflow.update
    async def say(self, text: str) -> str:
        answer = await workflow.execute_activity_method(ReplyActivities.reply, text, **OPTIONS)
        self.turns.append(text)
        return answer

    @workflow.query
    def turns_taken(self) -> int:
        return len(self.turns)

    @workflow.signal
    def end(self) -> None:
        self.ended = True

    @workflow.run
    async def run(self, user: str) -> int:
        await workflow.wait_condition(lambda: self.ended)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return len(self.turns)


async def converse(handle: WorkflowHandle[Any, Any]) -> None:
    """crashtest's DRIVE: each turn once the run has taken the one before, then the end."""
    for n, text in enumerate(TURNS):
        await wait_until(handle, Conversation.turns_taken, _at_least(n))
        await send_update(handle, Conversation.say, text, id=f"turn-{n + 1}")
    await send_signal(handle, Conversation.end)


def _at_least(n: int) -> Callable[[int], bool]:
    return lambda taken: taken >= n


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client, task_queue, [Conversation], lambda p: ReplyActivities(p, keyed=True).all()
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await shape_worker(
        client, task_queue, [Conversation], lambda p: ReplyActivities(p, keyed=False).all()
    )
