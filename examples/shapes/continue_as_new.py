"""A continue-as-new loop that charges once in each run: month 1, then (as a new run of the same
workflow id) month 2, ...

Activity ids restart at "1" in every run of the chain, so `{workflow_id}:{activity_id}` names
month 1's charge and month 2's alike: the naive key drops month 2's charge as a duplicate, in a
run that never crashed. The right key puts the run's place in the chain into it. crashtest warns
of the repeated activity ids; `--expect` with the two charges catches the naive key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The activities' side (Postgres, the project's settings) is not workflow code: the sandbox
# passes it through instead of importing it again for every run.
with workflow.unsafe.imports_passed_through():
    from psycopg_pool import AsyncConnectionPool

    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.ledger import record, workflow_key


@dataclass
class Plan:
    customer: str
    months: int
    month: int = 1


class MonthlyActivities:
    def __init__(self, pool: AsyncConnectionPool, *, chain_key: bool) -> None:
        self.pool = pool
        self.chain_key = chain_key

    @activity.defn
    async def charge(self, plan: Plan) -> None:
        info = activity.info()
        key = (
            f"{info.workflow_id}:month-{plan.month}:{info.activity_id}"
            if self.chain_key
            else workflow_key()
        )
        await record(self.pool, f"charge {plan.customer} month {plan.month}", key)

    def all(self) -> list[Callable[..., Any]]:
        return [self.charge]


@workflow.defn
class MonthlyCharges:
    @workflow.run
    async def run(self, plan: Plan) -> None:
        await workflow.execute_activity_method(MonthlyActivities.charge, plan, **OPTIONS)
        if plan.month < plan.months:
            workflow.continue_as_new(Plan(plan.customer, plan.months, plan.month + 1))


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    """Keys with the run's place in the chain: `{workflow_id}:month-{m}:{activity_id}`."""
    return await shape_worker(
        client, task_queue, [MonthlyCharges], lambda p: MonthlyActivities(p, chain_key=True).all()
    )


async def naive_worker(client: Client, task_queue: str) -> Worker:
    """Keys of `{workflow_id}:{activity_id}`: month 2's charge collides with month 1's."""
    return await shape_worker(
        client, task_queue, [MonthlyCharges], lambda p: MonthlyActivities(p, chain_key=False).all()
    )
