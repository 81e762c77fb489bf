"""`Order` v2 (a notice inserted, no patch: a pinned run never replays on it) as version `v2` of
a pinned Worker Deployment, made current as its worker starts."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.worker import Worker

from examples.deploys.pinned import pinned_worker
from examples.deploys.v2 import Order


async def worker(client: Client, task_queue: str) -> Worker:
    return await pinned_worker(client, task_queue, Order, "v2")
