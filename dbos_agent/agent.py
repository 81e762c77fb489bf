"""The grocery agent as a DBOS workflow: its steps, each a DBOS step calling the same step
function the Temporal activities and the journal call (`agent.steps`).

DBOS checkpoints each step's output in Postgres (its system tables, in the `dbos` schema of the
application's own database) when the step returns; a process that starts (`DBOS.launch()`)
recovers the workflows left pending and runs them on from their last recorded step. A step
killed after its effect and before DBOS recorded its output runs again, so every effect takes
the key `f"{workflow_id}:{number}"`, the step's own number (`agent.steps`; the `keyed` design).
DBOS's step id is a position (the steps and patch markers counted in the order they run): the
six steps' numbers are the step ids the release before gave them, but a step inserted before the
order gives the order another one — so a key from the step id (`position`, for comparison; `none`
takes no key) moves when a run killed after the order's effect resumes on the new release. The
workflow id is the business id, as for Temporal.

Today's release checks the price before the order, behind `DBOS.patch_async(PRICE_CHECK)`: a run
the release before recorded past `choose` keeps its path; a run that had recorded no step there
takes the check. The process's release is `use(...)`'s (`--release`: the deploy matrix runs the
release before and the check with no patch, too). DBOS recovers a run only in a process of the
application version that started it: the matrix runs both releases under one version, as
`DBOS__APPVERSION` pins it (docs/deploys.md).

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
from agent.data import (
    Choice,
    EmailSent,
    OrderPlaced,
    PantryReport,
    Plan,
    PriceQuote,
    Summary,
)
from agent.grocer import Grocer
from agent.llm import Model, UnrecordedAnswers
from agent.releases import PRICE_CHECK, Release
from agent.retries import NOT_RETRIED, STEP_RETRIES
from agent.steps import (
    CHECK_PANTRY,
    CHECK_PRICES,
    CHOOSE,
    PLACE_ORDER,
    PLAN,
    SEND_CONFIRMATION,
    SUMMARISE,
    Step,
)
from infra.config import parse_choice
from infra.errors import first_line

T = TypeVar("T", bound=BaseModel)
log = logging.getLogger(__name__)
# Runs enqueued from outside (`DBOSClient.enqueue`), taken by every process that serves the
# queue (`python -m dbos_agent serve` registers it), this many at once in each.
QUEUE_NAME = "grocery"
QUEUE_CONCURRENCY = 10


class KeyDesign(StrEnum):
    KEYED = "keyed"  # f"{workflow_id}:{number}": a repeated step finds its first effect
    NONE = "none"  # no key: a step run again after a kill repeats its effect
    # f"{workflow_id}:{step_id}", DBOS's position of the step: moves when a release inserts a
    # step before it (the deploy matrix's weak design)
    POSITION = "position"

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
    release: Release = Release.TODAY
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


def _key(design: KeyDesign, workflow_id: str, number: int) -> str | None:
    if design is KeyDesign.KEYED:
        return f"{workflow_id}:{number}"
    if design is KeyDesign.POSITION:
        return f"{workflow_id}:{DBOS.step_id}"
    return None


async def _step(
    spec: Step[T],
    design: KeyDesign,
    work: Callable[[psycopg.AsyncConnection, Dependencies, str, str | None], Awaitable[T]],
) -> T:
    """Run `work(conn, deps, run_id, key)`, retried on STEP_RETRIES; run_id is the workflow id.
    DBOS records what it returns when the step returns (or the last failure)."""
    workflow_id, step_id = DBOS.workflow_id, DBOS.step_id
    if workflow_id is None:
        raise RuntimeError("the grocery steps run inside the DBOS grocery workflow only")
    key = _key(design, workflow_id, spec.number)
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
        PLAN,
        request.design,
        lambda c, d, run, key: steps.plan(c, d.model, run, request.household, key),
    )


@DBOS.step(name="check_pantry")
async def check_pantry(request: DBOSRequest, plan: Plan) -> PantryReport:
    return await _step(
        CHECK_PANTRY,
        request.design,
        lambda c, d, run, key: steps.check_pantry(request.household, plan),
    )


@DBOS.step(name="choose")
async def choose(request: DBOSRequest, pantry: PantryReport) -> Choice:
    return await _step(
        CHOOSE, request.design, lambda c, d, run, key: steps.choose(c, d.model, run, pantry, key)
    )


@DBOS.step(name="place_order")
async def place_order(request: DBOSRequest, choice: Choice) -> OrderPlaced:
    return await _step(
        PLACE_ORDER,
        request.design,
        lambda c, d, run, key: steps.place_order(c, run, choice.lines, key, d.grocer),
    )


@DBOS.step(name="send_confirmation")
async def send_confirmation(request: DBOSRequest, order: OrderPlaced) -> EmailSent:
    return await _step(
        SEND_CONFIRMATION,
        request.design,
        lambda c, d, run, key: steps.send_confirmation(c, run, request.household, order, key),
    )


@DBOS.step(name="summarise")
async def summarise(request: DBOSRequest, order: OrderPlaced, email: EmailSent) -> Summary:
    return await _step(
        SUMMARISE,
        request.design,
        lambda c, d, run, key: steps.summarise(c, d.model, run, order, email, key),
    )


@DBOS.step(name="check_prices")
async def check_prices(request: DBOSRequest, choice: Choice) -> PriceQuote:
    return await _step(
        CHECK_PRICES, request.design, lambda c, d, run, key: steps.check_prices(choice)
    )


async def _checks_prices() -> bool:
    """Whether this run takes the price check: today's release asks DBOS's patch (a run that
    recorded a step where the marker would go keeps its path); unversioned, always."""
    release = _deps().release
    if release is Release.TODAY:
        return await DBOS.patch_async(PRICE_CHECK)
    return release is Release.UNVERSIONED


WORKFLOW_NAME = "GroceryAgentDBOS"


@DBOS.workflow(name=WORKFLOW_NAME)
async def grocery_agent(request: DBOSRequest) -> Summary:
    """The steps, one statement each."""
    log.info("run %s: opened (%s)", DBOS.workflow_id, request.design)
    plan_ = await plan(request)
    pantry = await check_pantry(request, plan_)
    choice = await choose(request, pantry)
    if await _checks_prices():
        await check_prices(request, choice)
    order = await place_order(request, choice)
    email = await send_confirmation(request, order)
    summary = await summarise(request, order, email)
    log.info("run %s: completed", DBOS.workflow_id)
    return summary
