"""A run a deploy blocked is never silent. The run starts on a version that shipped the price
check the guide's way (behind a patch, the SDK numbering the activities: the check is id 4);
that worker is killed once the check is scheduled, and today's `worker.py` takes the run over:
its code gives the check id 7, so the run's history no longer replays (a nondeterminism error).
The run stays Running; the worker says it in one ERROR line and counts it, `starter.py` waiting
on the run says it is blocked instead of waiting for ever, and `python -m infra blocked` lists
it."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agent.data import EXAMPLE_WEEK, GroceryRequest
from crashlab.lab import DATA_CONVERTER
from infra.processes import free_port
from tests.helpers import (
    RESULT_TIMEOUT_S,
    ROOT,
    WorkerProcess,
    child_env,
    new_run_id,
    run_python,
    scrape,
)
from workflows.grocery import GroceryAgentWorkflow

HOUSEHOLD = "blocked-by-a-deploy"
BLOCKED = "is blocked by a deploy: [TMPRL1100] Nondeterminism error"


async def scheduled(client: Client, workflow_id: str, activity: str) -> bool:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return any(
        e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity
        for e in history.events
    )


async def test_a_blocked_run_is_said_counted_and_listed(
    client: Client,
    db_url: str,
    temporal_address: str,
    workers: Callable[..., WorkerProcess],
    tmp_path: Path,
) -> None:
    queue = new_run_id("blocked")
    household = new_run_id(HOUSEHOLD)
    workflow_id = f"grocery-{household}-{EXAMPLE_WEEK}"
    env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address, TASK_QUEUE=queue)
    old = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "temporal_crashtest.worker",
        "--worker", "examples.deploys.grocery:by_position_worker", "--task-queue", queue,
        "--address", temporal_address, "--data-converter", DATA_CONVERTER,
        cwd=ROOT, env={**env, "STUB_MODEL_LATENCY_MS": "2000"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    handle = await client.start_workflow(
        GroceryAgentWorkflow.run,
        GroceryRequest(household=household, week=EXAMPLE_WEEK),
        id=workflow_id,
        task_queue=queue,
    )
    try:
        deadline = time.monotonic() + RESULT_TIMEOUT_S
        while not await scheduled(client, workflow_id, "check_prices"):
            assert time.monotonic() < deadline, "the old version never scheduled check_prices"
            await asyncio.sleep(0.2)
        old.kill()  # the deploy: the old version's last worker gone
        deployed_at = time.monotonic()
        port = free_port()
        new = workers(queue, METRICS_PORT=str(port))

        while BLOCKED not in new.log():
            assert time.monotonic() < deadline, new.log()
            await asyncio.sleep(0.2)
        first_error_s = time.monotonic() - deployed_at
        print(f"from the deploy to the worker's ERROR line: {first_error_s:.1f} s")
        [line] = [line for line in new.log().splitlines() if BLOCKED in line]
        print(f"the worker: {line}")
        assert "roll back to the version that started it, or ship the change" in line, line
        assert f"{workflow_id} (run " in line, line  # the business id, looked up
        metrics = scrape(port)
        assert re.search(r"^grocery_blocked_runs(\{[^}]*\})? 1$", metrics, re.M), metrics

        waiting = await asyncio.to_thread(
            run_python,
            ["starter.py", "--task-queue", queue, "--household", household],
            env,
            RESULT_TIMEOUT_S,
        )
        assert waiting.returncode == 2, waiting.stdout + waiting.stderr
        said = waiting.stderr.strip().splitlines()[-1]
        print(f"starter.py: {said}")
        assert said.startswith(f"error: {workflow_id} is blocked: [TMPRL1100]"), said
        assert "Traceback" not in waiting.stderr

        listed = await asyncio.to_thread(run_python, ["-m", "infra", "blocked"], env, 60)
        print(f"python -m infra blocked:\n{listed.stdout}")
        assert listed.returncode == 1, listed.stdout + listed.stderr
        assert f"{workflow_id} (run {handle.result_run_id}): [TMPRL1100]" in listed.stdout
        status = (await handle.describe()).status
        assert status is not None and status.name == "RUNNING"  # blocked, not failed
    finally:
        if old.returncode is None:
            old.kill()
        await old.wait()
        await handle.terminate("test over")
