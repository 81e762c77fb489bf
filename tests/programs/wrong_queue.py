"""A worker factory that ignores the task queue it is given: crashtest must say so in one line."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.worker import Worker

from examples.payments.workflow import PaymentsWorkflow


def build(client: Client, task_queue: str) -> Worker:
    return Worker(client, task_queue="elsewhere", workflows=[PaymentsWorkflow])
