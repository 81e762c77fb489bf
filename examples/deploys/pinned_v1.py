"""`Order` v1 (charge, then the receipt) as version `v1` of a pinned Worker Deployment."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.worker import Worker

from examples.deploys.pinned import pinned_worker
from examples.deploys.v1 import Order


async def worker(client: Client, task_queue: str) -> Worker:
    return await pinned_worker(client, task_queue, Order, "v1")
