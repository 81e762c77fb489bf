"""Temporal's cost per step, where that time goes, and the grocery agent end to end.

The bench process hosts the client and a worker; server, worker and client share the 2 cores.
Samples are interleaved (empty, 6 activities, 6 local activities, 6 with the agent's settings,
the grocery agent) so that noise lands on every figure alike.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable

from psycopg_pool import AsyncConnectionPool
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Worker

from activities.grocery import GroceryActivities
from agent.data import EXAMPLE_WEEK, GroceryRequest
from agent.llm import StubModel
from agent.steps import STEPS as AGENT_STEPS
from bench.stats import Figure
from bench.workflows import StepsSpec, StepsWorkflow, noop
from worker import STICKY_QUEUE_TIMEOUT
from workflows.grocery import GroceryAgentWorkflow

ACTIVITIES_PER_RUN = len(AGENT_STEPS)  # the no-op workflows have as many steps as the agent


def bench_worker(client: Client, queue: str, pool: AsyncConnectionPool) -> Worker:
    grocery = GroceryActivities(pool, StubModel())
    return Worker(
        client,
        task_queue=queue,
        workflows=[StepsWorkflow, GroceryAgentWorkflow],
        activities=[noop, *grocery.all()],
        sticky_queue_schedule_to_start_timeout=STICKY_QUEUE_TIMEOUT,
    )


async def _timed(work: Callable[[], Awaitable[object]]) -> int:
    t0 = time.perf_counter_ns()
    await work()
    return time.perf_counter_ns() - t0


def where_time_goes(histories: list[WorkflowHistory]) -> dict[str, float]:
    """Median ms per step of each leg of a step, read from the server's event timestamps."""
    legs: dict[str, list[float]] = defaultdict(list)
    for history in histories:
        at = {e.event_id: e.event_time.ToNanoseconds() / 1e6 for e in history.events}
        wft_scheduled = None
        wft_started = None
        for e in history.events:
            t = at[e.event_id]
            kind = e.event_type
            if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                wft_scheduled = t
            elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED and wft_scheduled is not None:
                wft_started = t
                legs["workflow task: scheduled -> picked up by the worker"].append(
                    t - wft_scheduled
                )
            elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED and wft_started is not None:
                legs["workflow task: processed by the worker (code + round trip)"].append(
                    t - wft_started
                )
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                started = e.activity_task_started_event_attributes
                legs["activity: scheduled -> picked up by the worker"].append(
                    t - at[started.scheduled_event_id]
                )
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                completed = e.activity_task_completed_event_attributes
                legs["activity: run and reported by the worker"].append(
                    t - at[completed.started_event_id]
                )
    # Each step has one activity and one workflow task; the first workflow task is the start.
    return {leg: round(statistics.median(v), 3) for leg, v in legs.items()}


async def measure_temporal(
    client: Client, pool: AsyncConnectionPool, n: int
) -> tuple[dict[str, Figure], dict[str, float]]:
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    samples: dict[str, list[int]] = defaultdict(list)
    histories: list[WorkflowHistory] = []

    def run(spec: StepsSpec) -> Callable[[], Awaitable[object]]:
        return lambda: client.execute_workflow(
            StepsWorkflow.run, spec, id=f"{queue}-{uuid.uuid4().hex[:8]}", task_queue=queue
        )

    def grocery() -> Awaitable[object]:
        return client.execute_workflow(
            GroceryAgentWorkflow.run,
            GroceryRequest(household="bench", week=EXAMPLE_WEEK),
            id=f"{queue}-grocery-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
        )

    variants: dict[str, Callable[[], Awaitable[object]]] = {
        "empty": run(StepsSpec(steps=0)),
        "activity": run(StepsSpec(steps=ACTIVITIES_PER_RUN)),
        "local": run(StepsSpec(steps=ACTIVITIES_PER_RUN, kind="local")),
        "grocery-settings": run(StepsSpec(steps=ACTIVITIES_PER_RUN, kind="grocery-settings")),
        "grocery": grocery,
    }
    async with bench_worker(client, queue, pool):
        warmup = 3
        for i in range(n + warmup):
            for name, work in variants.items():
                took = await _timed(work)
                if i >= warmup:
                    samples[name].append(took)
        for _ in range(min(n, 20)):
            handle = await client.start_workflow(
                StepsWorkflow.run,
                StepsSpec(steps=ACTIVITIES_PER_RUN),
                id=f"{queue}-{uuid.uuid4().hex[:8]}",
                task_queue=queue,
            )
            await handle.result()
            histories.append(await handle.fetch_history())

    def per_step(name: str) -> Figure:
        diffs = [max(0, s - e) for s, e in zip(samples[name], samples["empty"], strict=True)]
        return Figure.of_ns(diffs, per=ACTIVITIES_PER_RUN)

    figures = {
        "temporal empty workflow": Figure.of_ns(samples["empty"]),
        "temporal 6-activity workflow": Figure.of_ns(samples["activity"]),
        "temporal step (activity)": per_step("activity"),
        "temporal step (local activity)": per_step("local"),
        "temporal step (agent's activity settings)": per_step("grocery-settings"),
        "temporal grocery agent run": Figure.of_ns(samples["grocery"]),
    }
    return figures, where_time_goes(histories)
