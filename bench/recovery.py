"""Recovery: a worker SIGKILLed in the order activity, a new worker started at once; the time
from the new worker's start until the run completes."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from temporalio.client import Client

from activities.models import GroceryRequest
from bench.processes import start_worker, stop
from bench.stats import Figure
from workflows.grocery import GroceryAgentWorkflow


async def measure_recovery(client: Client, runs: int, log_dir: Path) -> Figure:
    samples: list[int] = []
    for _ in range(runs):
        queue = f"bench-recovery-{uuid.uuid4().hex[:8]}"
        doomed = await start_worker(queue, log_dir / f"{queue}-a.log", CRASH_AT="after-effect:4")
        handle = await client.start_workflow(
            GroceryAgentWorkflow.run,
            GroceryRequest(household="bench", week="2026-W49"),
            id=queue,
            task_queue=queue,
        )
        await asyncio.wait_for(doomed.wait(), 60)
        started = time.perf_counter_ns()
        rescuer = await start_worker(queue, log_dir / f"{queue}-b.log")
        try:
            await asyncio.wait_for(handle.result(), 60)
            samples.append(time.perf_counter_ns() - started)
        finally:
            await stop(rescuer)
    return Figure.of_ns(samples)
