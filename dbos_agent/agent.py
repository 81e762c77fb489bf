"""The grocery agent as a DBOS workflow: six steps, each a DBOS step calling the same step
function the Temporal activities and the journal call (`agent.steps`).

DBOS checkpoints each step's output in Postgres (its system tables, in the `dbos` schema of the
application's own database) when the step returns; a process that starts (`DBOS.launch()`)
recovers the workflows left pending and runs them on from their last recorded step. A step
killed after its effect and before DBOS recorded its output runs again, so every effect takes
the key `f"{workflow_id}:{step_id}"` from DBOS's own identity of the step (the `keyed` design;
`none` takes no key, for comparison). The workflow id is the business id, as for Temporal.

A step that fails is retried in its process on the schedule Temporal's activities use
(`agent.retries`: a model that did not answer, a grocer answering 503, a Postgres restarting),
each attempt on a fresh connection, and a model's answer paid for whose record failed is
recorded by the next attempt rather than paid for again; what another attempt cannot help
(`NOT_RETRIED`) fails the step at once. DBOS records the step's output or its last failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

import psycopg
from dbos import DBOS
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from agent import steps
from agent.data import Choice, EmailSent, OrderPlaced, PantryReport, Plan, Summary
from agent.grocer import Grocer
from agent.llm import Model, UnrecordedAnswers
from agent.retries import NOT_RETRIED, STEP_RETRIES
from infra.config import parse_choice
from infra.errors import first_line

T = TypeVar("T", bound=BaseModel)
log = logging.getLogger(__name__)
# Runs enqueued from outside (`DBOSClient.enqueue`), taken by every process that serves the
# queue (`python -m dbos_agent serve` registers it), this many at once in each.
QUEUE_NAME = "grocery"
QUEUE_CONCURRENCY = 10


class KeyDesign(StrEnum):
    KEYED = "keyed"  # f"{workflow_id}:{step_id}": a repeated step finds its first effect
    NONE = "none"  # no key: a step run again after a kill repeats its effect

    @classmethod
    def parse(cls, text: str) -> KeyDesign:
        return parse_choice(cls, text, "design")


class DBOSRequest(BaseModel):
    """The workflow's input (recorded by DBOS, so a recovering process runs the same design)."""

    household: str
    design: KeyDesign


@dataclass(kw_only=True, frozen=True)
class Dependencies:
    """What the steps write through: DBOS registers workflows and steps per process, so the
    process hands its dependencies over once, at start (`use`)."""

    pool: AsyncConnectionPool
    model: Model
    grocer: Grocer | None
    unrecorded: UnrecordedAnswers = field(default_factory=UnrecordedAnswers)
    running: Counter[str] = field(default_factory=Counter)  # workflow id -> steps running now


class _Process:
    dependencies: Dependencies | None = None


def use(dependencies: Dependencies) -> None:
    """The dependencies of this process's steps (before `DBOS.launch()` recovers any)."""
    _Process.dependencies = dependencies


def _deps() -> Dependencies:
    if _Process.dependencies is None:
        raise RuntimeError("dbos_agent.agent.use(...) was not called before DBOS.launch()")
    return _Process.dependencies


async def _step(
    design: KeyDesign,
    work: Callable[[psycopg.AsyncConnection, Dependencies, str, str | None], Awaitable[T]],
) -> T:
    """Run `work(conn, deps, run_id, key)`, retried on STEP_RETRIES; run_id is the workflow id.
    DBOS records what it returns when the step returns (or the last failure)."""
    workflow_id, step_id = DBOS.workflow_id, DBOS.step_id
    if workflow_id is None:
        raise RuntimeError("the grocery steps run inside the DBOS grocery workflow only")
    key = f"{workflow_id}:{step_id}" if design is KeyDesign.KEYED else None
    deps = _deps()
    deps.running[workflow_id] += 1
    try:
        with deps.unrecorded.lend():
            waits = STEP_RETRIES.waits()
            attempt = 1
            while True:
                try:
                    async with deps.pool.connection() as conn:
                        return await work(conn, deps, workflow_id, key)
                except NOT_RETRIED:
                    raise
                except Exception as err:
                    wait = next(waits, None)
                    if wait is None:
                        raise
                    log.warning(
                        "run %s step %s: attempt %d of %d failed (%s: %s); again in %g s",
                        workflow_id,
                        step_id,
                        attempt,
                        STEP_RETRIES.attempts,
                        type(err).__name__,
                        first_line(err),
                        wait,
                    )
                    attempt += 1
                    await asyncio.sleep(wait)
    finally:
        deps.running[workflow_id] -= 1
        if deps.running[workflow_id] <= 0:
            del deps.running[workflow_id]


@DBOS.step(name="plan")
async def plan(request: DBOSRequest) -> Plan:
    return await _step(
        request.design, lambda c, d, run, key: steps.plan(c, d.model, run, request.household, key)
    )


@DBOS.step(name="check_pantry")
async def check_pantry(request: DBOSRequest, plan: Plan) -> PantryReport:
    return await _step(
        request.design, lambda c, d, run, key: steps.check_pantry(request.household, plan)
    )


@DBOS.step(name="choose")
async def choose(request: DBOSRequest, pantry: PantryReport) -> Choice:
    return await _step(
        request.design, lambda c, d, run, key: steps.choose(c, d.model, run, pantry, key)
    )


@DBOS.step(name="place_order")
async def place_order(request: DBOSRequest, choice: Choice) -> OrderPlaced:
    return await _step(
        request.design,
        lambda c, d, run, key: steps.place_order(c, run, choice.lines, key, d.grocer),
    )


@DBOS.step(name="send_confirmation")
async def send_confirmation(request: DBOSRequest, order: OrderPlaced) -> EmailSent:
    return await _step(
        request.design,
        lambda c, d, run, key: steps.send_confirmation(c, run, request.household, order, key),
    )


@DBOS.step(name="summarise")
async def summarise(request: DBOSRequest, order: OrderPlaced, email: EmailSent) -> Summary:
    return await _step(
        request.design, lambda c, d, run, key: steps.summarise(c, d.model, run, order, email, key)
    )


WORKFLOW_NAME = "GroceryAgentDBOS"


@DBOS.workflow(name=WORKFLOW_NAME)
async def grocery_agent(request: DBOSRequest) -> Summary:
    """The six steps, one statement each."""
    log.info("run %s: opened (%s)", DBOS.workflow_id, request.design)
    plan_ = await plan(request)
    pantry = await check_pantry(request, plan_)
    choice = await choose(request, pantry)
    order = await place_order(request, choice)
    email = await send_confirmation(request, order)
    summary = await summarise(request, order, email)
    log.info("run %s: completed", DBOS.workflow_id)
    return summary
