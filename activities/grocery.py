"""The six steps as Temporal activities: methods of a class handed its dependencies.

Each side effect gets the idempotency key f"{workflow_id}:{activity_id}" from `activity.info()`.
Temporal may run an activity more than once (a worker killed after the effect and before the
server heard of it); the key makes the second attempt find the first attempt's row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool
from temporalio import activity

from agent import steps
from agent.data import (
    Choice,
    ConfirmationInput,
    EmailSent,
    GroceryRequest,
    OrderPlaced,
    PantryInput,
    PantryReport,
    Plan,
    PriceQuote,
    Summary,
    SummaryInput,
)
from agent.grocer import Grocer
from agent.llm import Model, UnrecordedAnswers
from infra.config import parse_choice

T = TypeVar("T")

# Heartbeat this often while a step runs: a killed worker is noticed after the workflow's
# heartbeat_timeout, not after the (much longer) start_to_close_timeout.
HEARTBEAT_EVERY_S = 0.5


class KeyStrategy(StrEnum):
    WORKFLOW = "workflow"  # workflow id + activity id: survives resets and retries (default)
    RUN = "run"  # run id + activity id, as Temporal's docs suggest: a reset orders again
    NONE = "none"  # no key: a retried effect is done twice (the weak design, for comparison)

    @classmethod
    def parse(cls, text: str) -> KeyStrategy:
        return parse_choice(cls, text, "key strategy")


def idempotency_key(strategy: KeyStrategy, info: activity.Info) -> str | None:
    if strategy is KeyStrategy.WORKFLOW:
        return f"{info.workflow_id}:{info.activity_id}"
    if strategy is KeyStrategy.RUN:
        return f"{info.workflow_run_id}:{info.activity_id}"
    return None


async def heartbeating(work: Awaitable[T]) -> T:
    """Await `work`, heartbeating to the server until it is done."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_EVERY_S)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        task.cancel()


class GroceryActivities:
    """The six steps as Temporal activities, handed their dependencies (a Postgres pool, the
    model, the key strategy, the grocer or None). Each activity heartbeats, derives its
    idempotency key from `workflow_id:activity_id` (KEY_STRATEGY: `run` uses the run id, `none`
    no key) and calls the same step function the journal does (agent.steps)."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        model: Model,
        key_strategy: KeyStrategy = KeyStrategy.WORKFLOW,
        grocer: Grocer | None = None,
    ) -> None:
        self.pool = pool
        self.model = model
        self.key_strategy = key_strategy
        self.grocer = grocer  # None: orders go to our own table
        # An answer paid for whose record failed: the next attempt on this worker records it.
        self.unrecorded = UnrecordedAnswers()

    async def _step(
        self, work: Callable[[psycopg.AsyncConnection, str, str | None], Awaitable[T]]
    ) -> T:
        """Run `work(conn, run_id, key)`; run_id is the workflow id."""
        info = activity.info()
        if info.workflow_id is None:
            raise RuntimeError("the grocery activities run inside GroceryAgentWorkflow only")
        with self.unrecorded.lend():
            async with self.pool.connection() as conn:
                return await heartbeating(
                    work(conn, info.workflow_id, idempotency_key(self.key_strategy, info))
                )

    def all(self) -> list[Callable[..., Awaitable[object]]]:
        """The six activities in the order of `agent.steps.STEPS`, and the next version's price
        check, for a Worker's `activities=`."""
        return [getattr(self, step.name) for step in (*steps.STEPS, steps.CHECK_PRICES)]

    @activity.defn
    async def plan(self, request: GroceryRequest) -> Plan:
        return await self._step(
            lambda conn, run_id, key: steps.plan(conn, self.model, run_id, request.household, key)
        )

    @activity.defn
    async def check_pantry(self, data: PantryInput) -> PantryReport:
        return await self._step(lambda *_: steps.check_pantry(data.household, data.plan))

    @activity.defn
    async def choose(self, pantry: PantryReport) -> Choice:
        return await self._step(
            lambda conn, run_id, key: steps.choose(conn, self.model, run_id, pantry, key)
        )

    @activity.defn
    async def check_prices(self, choice: Choice) -> PriceQuote:
        return await self._step(lambda *_: steps.check_prices(choice))

    @activity.defn
    async def place_order(self, choice: Choice) -> OrderPlaced:
        return await self._step(
            lambda conn, run_id, key: steps.place_order(
                conn, run_id, choice.lines, key, self.grocer
            )
        )

    @activity.defn
    async def send_confirmation(self, data: ConfirmationInput) -> EmailSent:
        return await self._step(
            lambda conn, run_id, key: steps.send_confirmation(
                conn, run_id, data.household, data.order, key
            )
        )

    @activity.defn
    async def summarise(self, data: SummaryInput) -> Summary:
        return await self._step(
            lambda conn, run_id, key: steps.summarise(
                conn, self.model, run_id, data.order, data.email, key
            )
        )
