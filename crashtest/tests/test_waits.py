"""What a run past its deadline is said to wait on, asked of a real server: a run with no
pending activity waits on its workflow task, and the words say on which attempt and whether a
worker holds it (a CI failure once said only "the run is running")."""

from __future__ import annotations

import asyncio
import uuid

from temporal_crashtest._run.recovery.polling import what_it_waits_on
from temporalio.client import Client


def test_a_run_waiting_on_its_workflow_task_says_so(temporal_address: str) -> None:
    async def ask() -> str:
        client = await Client.connect(temporal_address)
        handle = await client.start_workflow(
            "NobodyRunsThis", id=f"waits-{uuid.uuid4().hex[:8]}", task_queue=uuid.uuid4().hex
        )
        try:
            return await what_it_waits_on(handle)
        finally:
            await handle.terminate()

    said = asyncio.run(ask())
    assert said.startswith("the run is running; its workflow task, attempt 1, was scheduled "), said
    assert said.endswith("ago (no worker has taken it yet)"), said
