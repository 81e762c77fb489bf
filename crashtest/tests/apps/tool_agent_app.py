"""An agent shaped as temporal-ai-agent is: its workflow runs fixed activities (a planner, a
class's method) and hands each confirmed tool to a helper in another module
(`tool_agent_helpers.run_tool`), which runs the tool as an activity named at run time, on a
second task queue for some tools. Importing this module has an effect (it writes the file named
by SCAFFOLD_IMPORT_MARK, as a module that starts a client or reaches a network would): scaffold
reads its source and never imports it."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    import tool_agent_helpers as helpers

if os.environ.get("SCAFFOLD_IMPORT_MARK"):
    Path(os.environ["SCAFFOLD_IMPORT_MARK"]).write_text("imported")


@activity.defn(name="plan_next_step")
async def planner(goal: str) -> str:
    return "create_invoice"


class Checks:
    @activity.defn
    async def validate(self, goal: str) -> bool:
        return True


@workflow.defn
class ToolAgent:
    @workflow.run
    async def run(self, goal: str) -> str:
        timeout = timedelta(seconds=10)
        await workflow.execute_activity_method(
            Checks.validate, goal, start_to_close_timeout=timeout
        )
        tool = await workflow.execute_activity(planner, goal, start_to_close_timeout=timeout)
        return await helpers.run_tool(tool, goal)

    @workflow.signal(name="confirm")
    async def confirmed(self) -> None:
        pass
