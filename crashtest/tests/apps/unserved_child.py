"""A workflow that starts its child on a task queue no worker serves: the child never runs."""

from __future__ import annotations

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker


@workflow.defn
class Child:
    @workflow.run
    async def run(self) -> None: ...


@workflow.defn
class StartsAnUnservedChild:
    @workflow.run
    async def run(self, _: str) -> None:
        queue = f"{workflow.info().task_queue}-nobody"
        await workflow.execute_child_workflow(Child.run, task_queue=queue)


def build(client: Client, task_queue: str) -> Worker:
    return Worker(client, task_queue=task_queue, workflows=[StartsAnUnservedChild, Child])


def observe(workflow_id: str) -> None:
    return None
