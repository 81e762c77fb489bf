"""Worker factories of the grocery agent's versions, for its deploy crash tests: the release
before the price check (`workflows.grocery_v1`), today's (`workflows.grocery`: activity ids name
the steps), and the price check shipped the guide's way with numbered ids
(`grocery_by_position`)."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.worker import Worker

import workflows.grocery_v1
from examples.deploys import grocery_by_position
from worker import build_worker


async def v1_worker(client: Client, task_queue: str) -> Worker:
    return await build_worker(client, task_queue, workflows.grocery_v1.GroceryAgentWorkflow)


async def by_position_worker(client: Client, task_queue: str) -> Worker:
    return await build_worker(client, task_queue, grocery_by_position.GroceryAgentWorkflow)
