"""`Order` v2 as version `v2` of a pinned Worker Deployment whose worker polls but is not made
the current version while another one is: a deploy that forgot `set-current-version` (alone,
for its own run without a crash, it is made current). A run killed inside its first workflow
task stays on its way to v1, the current version, whose workers are gone."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.worker import Worker

from examples.deploys.pinned import pinned_worker
from examples.deploys.v2 import Order


async def worker(client: Client, task_queue: str) -> Worker:
    return await pinned_worker(client, task_queue, Order, "v2", current=False)
