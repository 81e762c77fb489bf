"""tool_agent_app's helper: the tool it is given runs as an activity of that name, the train
tools on a task queue of their own."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

LEGACY_QUEUE = "agent-legacy"


async def run_tool(tool: str, goal: str) -> Any:
    queue = LEGACY_QUEUE if tool in ("SearchTrains", "BookTrains") else None
    return await workflow.execute_activity(
        tool, goal, task_queue=queue, start_to_close_timeout=timedelta(seconds=10)
    )
