"""Throughput: N concurrent grocery runs (stub model, no latency) completed per second.

`python -m bench.throughput journal N C` runs the journal side in a process of its own, so that
its memory is measured alone; it prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
import uuid

from psycopg_pool import AsyncConnectionPool
from temporal_crashtest import Processes
from temporalio.client import Client

from agent.data import EXAMPLE_WEEK, GroceryRequest
from agent.llm import StubModel
from bench.memory import peak_rss_mb
from bench.stats import Throughput
from infra.config import PROJECT_ROOT
from infra.db import ensure_database_url, open_pool
from journal.agent import run_to_completion
from journal.engine import Design
from workflows.grocery import GroceryAgentWorkflow


async def journal_throughput(runs: int, concurrency: int) -> Throughput:
    """Runs share a pool of `concurrency` connections, each run holding one while it runs."""
    pool: AsyncConnectionPool = await open_pool(ensure_database_url(), max_size=concurrency)
    model = StubModel()
    tag = uuid.uuid4().hex[:8]

    async def one(i: int) -> None:
        async with pool.connection() as conn:
            await run_to_completion(conn, model, f"bench-tp-{tag}-{i}", Design.DURABLE, "bench")

    try:
        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(runs)))
        seconds = time.perf_counter() - started
    finally:
        await pool.close()
    rss = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return Throughput(
        per_s=round(runs / seconds, 1), runs=runs, seconds=round(seconds, 2), rss_mb=rss
    )


async def journal_throughput_in_child(runs: int, concurrency: int) -> Throughput:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.throughput",
        "journal",
        str(runs),
        str(concurrency),
        cwd=PROJECT_ROOT,
        env={**os.environ, "DATABASE_URL": ensure_database_url()},
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"the journal throughput process exited with {proc.returncode}")
    return Throughput.model_validate_json(out.decode().strip().splitlines()[-1])


async def temporal_throughput(client: Client, procs: Processes, runs: int) -> Throughput:
    """One real worker process (worker.py); all runs started at once."""
    queue = f"bench-tp-{uuid.uuid4().hex[:8]}"
    worker = await procs.start(queue, ["worker.py"], TASK_QUEUE=queue)
    try:
        # A first run proves the worker is polling before the clock starts.
        await client.execute_workflow(
            GroceryAgentWorkflow.run,
            GroceryRequest(household="bench", week=EXAMPLE_WEEK),
            id=f"{queue}-warmup",
            task_queue=queue,
        )
        started = time.perf_counter()
        handles = await asyncio.gather(
            *(
                client.start_workflow(
                    GroceryAgentWorkflow.run,
                    GroceryRequest(household="bench", week=EXAMPLE_WEEK),
                    id=f"{queue}-{i}",
                    task_queue=queue,
                )
                for i in range(runs)
            )
        )
        await asyncio.gather(*(h.result() for h in handles))
        seconds = time.perf_counter() - started
        rss = peak_rss_mb(worker.pid)
    finally:
        await procs.stop(worker)
    return Throughput(
        per_s=round(runs / seconds, 1), runs=runs, seconds=round(seconds, 2), rss_mb=rss
    )


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "journal":
        sys.exit("usage: python -m bench.throughput journal RUNS CONCURRENCY")
    result = asyncio.run(journal_throughput(int(sys.argv[2]), int(sys.argv[3])))
    print(json.dumps(result.model_dump()))
