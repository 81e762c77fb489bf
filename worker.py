"""`python worker.py`: a Temporal worker for the grocery agent's task queue.

Its settings come from the environment (the table in docs/operations.md). SIGTERM or Ctrl-C
shuts down gracefully: running activities get 10 s to finish. It logs one line when it loses
Postgres or Temporal, and one when it has it back.

`build_worker(client, task_queue)` builds the same worker on a client and task queue it is
given, for a tool that runs it on a client of its own (crashtest does). `main` takes
more client interceptors for a caller that runs this worker with some (the chaos lab does).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Sequence
from datetime import timedelta

from psycopg_pool import AsyncConnectionPool
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client, Interceptor
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Worker

from activities.grocery import HEARTBEAT_EVERY_S, GroceryActivities, KeyStrategy
from agent.grocer import Grocer, configured_grocer, grocer_from_env
from agent.llm import model_from_env
from infra.blocked import report_blocked_runs
from infra.cli import ArgumentParser, run_main
from infra.config import env_port, env_str, task_queue
from infra.db import ensure_database_url, ensure_schema, open_pool
from infra.errors import ConfigError
from infra.health import PROBE_TIMEOUT_S, Probe, watch
from infra.logs import sdk_logging
from infra.metrics import count_effects, metrics_address
from infra.temporal_client import connect_temporal
from workflows.grocery import GroceryAgentWorkflow

log = logging.getLogger("worker")

# A workflow task for a run cached on a dead worker waits this long on that worker's sticky queue
# before any worker may take it. The SDK default is 10 s; 1 s costs a healthy run nothing.
STICKY_QUEUE_TIMEOUT = timedelta(seconds=1)


def key_strategy() -> KeyStrategy:
    return KeyStrategy.parse(env_str("KEY_STRATEGY") or "workflow")


def make_worker(
    client: Client,
    pool: AsyncConnectionPool,
    queue: str,
    grocer: Grocer | None,
    workflow: type = GroceryAgentWorkflow,
) -> Worker:
    """The grocery worker; KEY_STRATEGY and STUB_MODEL_LATENCY_MS come from the environment.
    `workflow`: another version of GroceryAgentWorkflow (a deploy crash test's)."""
    model = model_from_env()
    activities = GroceryActivities(pool, model, key_strategy(), grocer)
    return Worker(
        client,
        task_queue=queue,
        workflows=[workflow],
        activities=activities.all(),
        sticky_queue_schedule_to_start_timeout=STICKY_QUEUE_TIMEOUT,
        graceful_shutdown_timeout=timedelta(seconds=10),
        # The SDK sends a heartbeat at most every 0.8 x heartbeat_timeout (1.6 s of the 2 s):
        # a heartbeat 0.4 s late on a busy host would time a live attempt out, and an unkeyed
        # step would run again beside it. Sent as often as the activities beat, 1.5 s are left.
        max_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT_EVERY_S),
    )


async def open_app_pool() -> AsyncConnectionPool:
    pool = await open_pool(ensure_database_url())
    async with pool.connection() as conn:
        await ensure_schema(conn)
    return pool


async def build_worker(
    client: Client, task_queue: str, workflow: type = GroceryAgentWorkflow
) -> Worker:
    """The same worker on a given client and task queue; its pool lives as long as the
    process."""
    return make_worker(client, await open_app_pool(), task_queue, grocer_from_env(), workflow)


def dependencies(pool: AsyncConnectionPool, client: Client) -> dict[str, Probe]:
    async def postgres() -> None:
        async with pool.connection(timeout=PROBE_TIMEOUT_S) as conn:
            await conn.execute("select 1")

    async def temporal() -> None:
        await client.workflow_service.get_system_info(
            GetSystemInfoRequest(), timeout=timedelta(seconds=PROBE_TIMEOUT_S)
        )

    return {"Postgres": postgres, "Temporal": temporal}


def metrics_runtime(port: int) -> Runtime:
    """An SDK runtime serving Prometheus metrics on METRICS_HOST:`port`; ConfigError (one line)
    if it cannot listen there (the port in use, an address not of this machine)."""
    address = metrics_address(port)
    try:
        return Runtime(
            telemetry=TelemetryConfig(
                logging=sdk_logging(),
                metrics=PrometheusConfig(bind_address=address),
            )
        )
    except ValueError as err:
        why = str(err).removeprefix("Failed starting Prometheus exporter: ")
        raise ConfigError(
            f"METRICS_PORT={port}: cannot serve metrics on {address}: {why}"
        ) from None


async def main(interceptors: Sequence[Interceptor] = ()) -> int:
    # Validate every setting before connecting to anything.
    model_from_env()
    strategy = key_strategy()
    metrics_port = env_port("METRICS_PORT")
    queue = task_queue()
    async with configured_grocer() as grocer:
        runtime = None
        if metrics_port is not None:
            runtime = metrics_runtime(metrics_port)
            count_effects(runtime.metric_meter)  # ours beside the SDK's: effects created, refused
        pool = await open_app_pool()
        try:
            client = await connect_temporal(runtime=runtime, interceptors=interceptors)
            # A run a deploy blocked: one ERROR line and a count (grocery_blocked_runs).
            meter = runtime.metric_meter if runtime is not None else None
            report_blocked_runs(log, meter, client)
            health = asyncio.create_task(watch(dependencies(pool, client), log))
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            async with make_worker(client, pool, queue, grocer):
                log.info(
                    "worker ready: pid %d, task queue %s, keys %s", os.getpid(), queue, strategy
                )
                await stop.wait()
                log.info("shutting down")
            health.cancel()
        finally:
            await pool.close()
    return 0


if __name__ == "__main__":
    # It takes no argument (its settings come from the environment): one given is a mistake,
    # said in one line, not a worker started as if it were not there.
    ArgumentParser(prog="python worker.py", description=__doc__.splitlines()[0]).parse_args()
    run_main(main())
