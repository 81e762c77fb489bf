"""Workflows that measure Temporal's own cost: N no-op steps, as activities or local activities.

Kept apart from the product's workflow; the sandbox re-imports this module, so it has no side
effects at import.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal, TypedDict

from pydantic import BaseModel
from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from workflows.grocery import ACTIVITY_OPTIONS


class PlainOptions(TypedDict):
    start_to_close_timeout: timedelta


PLAIN = PlainOptions(start_to_close_timeout=timedelta(seconds=30))

Kind = Literal["activity", "local", "grocery-settings"]


class StepsSpec(BaseModel):
    steps: int
    kind: Kind = "activity"


@activity.defn
async def noop(i: int) -> int:
    return i


@workflow.defn
class StepsWorkflow:
    @workflow.run
    async def run(self, spec: StepsSpec) -> int:
        for i in range(spec.steps):
            if spec.kind == "local":
                await workflow.execute_local_activity(noop, i, **PLAIN)
            elif spec.kind == "grocery-settings":  # heartbeat timeout and retry policy of the agent
                await workflow.execute_activity(noop, i, **ACTIVITY_OPTIONS)
            else:
                await workflow.execute_activity(noop, i, **PLAIN)
        return spec.steps


@workflow.defn
class SleepWorkflow:
    """Sleeps `seconds` on a server timer: how late it wakes is how late the timer queue is."""

    @workflow.run
    async def run(self, seconds: float) -> None:
        await workflow.sleep(timedelta(seconds=seconds))
