"""What every shape's worker shares: activity options that notice a killed worker in 2 s and
retry a bounded number of times, and a factory that opens the ledger and builds the worker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypedDict

from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from examples.shapes.ledger import open_ledger


class ActivityOptions(TypedDict):
    start_to_close_timeout: timedelta
    heartbeat_timeout: timedelta
    retry_policy: RetryPolicy


OPTIONS = ActivityOptions(
    start_to_close_timeout=timedelta(seconds=30),
    heartbeat_timeout=timedelta(seconds=2),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
)
HEARTBEAT_S = 0.25


async def answer_after(seconds: float) -> None:
    """A slow API: answer after `seconds`, heartbeating meanwhile (the heartbeat timeout is 2 s)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    while (left := until - loop.time()) > 0:
        activity.heartbeat()
        await asyncio.sleep(min(HEARTBEAT_S, left))


async def shape_worker(
    client: Client,
    task_queue: str,
    workflows: Sequence[type],
    activities: Callable[[AsyncConnectionPool], Sequence[Callable[..., Any]]],
    workflow_runner: WorkflowRunner | None = None,
    worker_class: type[Worker] = Worker,
    **options: Any,
) -> Worker:
    """FACTORY(client, task_queue) for crashtest: the workflows, and the activities made on the
    ledger's pool (which lives as long as the worker process); `workflow_runner`: the
    sandbox's unless given; `worker_class` and `options`: another kind of `Worker`, more of its
    arguments."""
    pool = await open_ledger()
    return worker_class(
        client,
        task_queue=task_queue,
        workflows=workflows,
        activities=activities(pool),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        # Heartbeats sent as often as the activities beat, not at most every 1.6 s of the 2 s
        # heartbeat timeout (the SDK's default throttle, 0.8 of it): a live attempt that is
        # 0.4 s late on a busy host is not timed out.
        max_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT_S),
        workflow_runner=workflow_runner or SandboxedWorkflowRunner(),
        **options,
    )
