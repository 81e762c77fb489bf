"""A workflow crashtest cannot finish, to show it says why within seconds: its one activity fails
on every attempt (the workflow sends an amount the activity cannot decode)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker


@activity.defn
async def charge_cents(cents: int) -> int:
    return cents


@workflow.defn
class UndecodableCharge:
    @workflow.run
    async def run(self, amount: str) -> int:
        result: int = await workflow.execute_activity(
            "charge_cents",
            {"amount": amount},
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200)),
        )
        return result


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client, task_queue=task_queue, workflows=[UndecodableCharge], activities=[charge_cents]
    )


def observe(workflow_id: str) -> None:
    return None
