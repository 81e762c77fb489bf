"""`python worker.py`: a Temporal worker for the grocery agent's task queue.

Environment: TEMPORAL_ADDRESS (unset: the local dev server, started if needed), DATABASE_URL
(unset: the embedded Postgres), TASK_QUEUE, KEY_STRATEGY (workflow | run | none), CRASH_AT
(the worker SIGKILLs itself there), STUB_MODEL_LATENCY_MS, METRICS_PORT (Prometheus /metrics).
SIGTERM or Ctrl-C shuts down gracefully: running activities get 10 s to finish.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from datetime import timedelta

from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Worker

from activities.crash_points import Moment, crash_point_from_env
from activities.model import StubModel
from activities.temporal import GroceryActivities, KeyStrategy
from store.cli import run_main
from store.config import env_port, env_str, model_latency_seconds, task_queue
from store.db import database_url, ensure_schema, open_pool
from store.errors import ConfigError
from store.temporal_client import connect_temporal
from workflows.grocery import GroceryAgentWorkflow

log = logging.getLogger("worker")

# A workflow task for a run cached on a dead worker waits this long on that worker's sticky queue
# before any worker may take it. The SDK default is 10 s; 1 s costs a healthy run nothing.
STICKY_QUEUE_TIMEOUT = timedelta(seconds=1)


def make_worker(client: Client, activities: GroceryActivities, queue: str) -> Worker:
    return Worker(
        client,
        task_queue=queue,
        workflows=[GroceryAgentWorkflow],
        activities=activities.all(),
        sticky_queue_schedule_to_start_timeout=STICKY_QUEUE_TIMEOUT,
        graceful_shutdown_timeout=timedelta(seconds=10),
    )


async def main() -> int:
    # Validate every setting before connecting to anything.
    crash_at = crash_point_from_env()
    if crash_at is not None and crash_at.moment is Moment.AFTER_CHECKPOINT and crash_at.step == 6:
        raise ConfigError("after-checkpoint:6 has no next activity to crash in; use 1..5")
    key_strategy = KeyStrategy.parse(env_str("KEY_STRATEGY") or "workflow")
    metrics_port = env_port("METRICS_PORT")
    model = StubModel(model_latency_seconds())
    queue = task_queue()

    runtime = None
    if metrics_port is not None:
        runtime = Runtime(
            telemetry=TelemetryConfig(
                metrics=PrometheusConfig(bind_address=f"127.0.0.1:{metrics_port}")
            )
        )
    pool = await open_pool(database_url())
    try:
        async with pool.connection() as conn:
            await ensure_schema(conn)
        client = await connect_temporal(runtime=runtime)
        activities = GroceryActivities(pool, model, key_strategy, crash_at)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with make_worker(client, activities, queue):
            log.info(
                "worker ready: pid %d, task queue %s, keys %s%s",
                os.getpid(),
                queue,
                key_strategy,
                f", will crash at {crash_at}" if crash_at else "",
            )
            await stop.wait()
            log.info("shutting down")
    finally:
        await pool.close()
    return 0


if __name__ == "__main__":
    run_main(main())
