"""Recovery: a worker SIGKILLed in the order activity, a new worker started at once; the time
from the new worker's start until the run completes."""

from __future__ import annotations

import asyncio
import time
import uuid

from temporal_crashtest import Processes
from temporalio.client import Client

from agent.data import EXAMPLE_WEEK, GroceryRequest
from agent.steps import PLACE_ORDER
from bench.stats import Figure
from crashlab.lab import crashing_worker
from workflows.grocery import GroceryAgentWorkflow


async def measure_recovery(client: Client, procs: Processes, runs: int) -> Figure:
    return Figure.of_ns(await recovery_samples(client, procs, runs))


async def recovery_samples(client: Client, procs: Processes, runs: int) -> list[int]:
    """Nanoseconds from the new worker's start to the run's completion, one per run."""
    samples: list[int] = []
    for _ in range(runs):
        queue = f"bench-recovery-{uuid.uuid4().hex[:8]}"
        crash_at = f"after-effect:{PLACE_ORDER.name}"  # the order activity, whatever its place
        doomed = await procs.start(f"{queue}-a", crashing_worker(queue, crash_at))
        handle = await client.start_workflow(
            GroceryAgentWorkflow.run,
            GroceryRequest(household="bench", week=EXAMPLE_WEEK),
            id=queue,
            task_queue=queue,
        )
        await procs.wait(doomed, 60)
        started = time.perf_counter_ns()
        rescuer = await procs.start(f"{queue}-b", ["worker.py"], TASK_QUEUE=queue)
        try:
            await asyncio.wait_for(handle.result(), 60)
            samples.append(time.perf_counter_ns() - started)
        finally:
            await procs.stop(rescuer)
    return samples
