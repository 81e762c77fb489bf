"""The grocery agent on the hand-rolled journal: its steps, one statement each.

Today's release checks the order's price before placing it (`check_prices`, step 7: a number of
its own, so no other step's number, row or key moves). The journal's versioning is its numbered,
named steps plus one rule for a step inserted before others: it runs only in a run that has not
saved the step it comes before (`Journal.saved_step`), so a run the release before took past the
order keeps its path, as `workflow.patched` keeps a Temporal run's."""

from __future__ import annotations

import psycopg

from agent import steps
from agent.data import Summary
from agent.grocer import Grocer
from agent.llm import Model
from agent.releases import Release
from agent.steps import (
    CHECK_PANTRY,
    CHECK_PRICES,
    CHOOSE,
    PLACE_ORDER,
    PLAN,
    SEND_CONFIRMATION,
    SUMMARISE,
)
from journal.crash_points import StepCrashPoint
from journal.engine import Design, Journal, Pause


async def run_agent(
    j: Journal,
    model: Model,
    household: str,
    grocer: Grocer | None,
    release: Release = Release.TODAY,
) -> Summary:
    run_id = j.run_id
    plan = await j.step(PLAN, lambda c: steps.plan(c.conn, model, run_id, household, c.key))
    pantry = await j.step(CHECK_PANTRY, lambda c: steps.check_pantry(household, plan))
    choice = await j.step(CHOOSE, lambda c: steps.choose(c.conn, model, run_id, pantry, c.key))
    if checks_prices(j, release):
        await j.step(CHECK_PRICES, lambda c: steps.check_prices(choice))
    order = await j.step(
        PLACE_ORDER, lambda c: steps.place_order(c.conn, run_id, choice.lines, c.key, grocer)
    )
    email = await j.step(
        SEND_CONFIRMATION,
        lambda c: steps.send_confirmation(c.conn, run_id, household, order, c.key),
    )
    return await j.step(
        SUMMARISE, lambda c: steps.summarise(c.conn, model, run_id, order, email, c.key)
    )


def checks_prices(j: Journal, release: Release) -> bool:
    """Whether this run takes the price check: in today's release, unless the run saved its
    order already (one the release before placed keeps its path); unversioned, always."""
    if release is Release.TODAY:
        return not j.saved_step(PLACE_ORDER)
    return release is Release.UNVERSIONED


async def run_to_completion(
    conn: psycopg.AsyncConnection,
    model: Model,
    run_id: str,
    design: Design,
    household: str,
    crash_at: StepCrashPoint | None = None,
    pause: Pause | None = None,
    grocer: Grocer | None = None,
    release: Release = Release.TODAY,
) -> Summary:
    """Start or resume a run and drive it to the end (RunBusy if another process is on it)."""
    journal = await Journal.open(conn, run_id, design, household, crash_at, pause)
    try:
        summary = await run_agent(journal, model, household, grocer, release)
    except BaseException:
        await journal.release()
        raise
    await journal.finish(summary)
    return summary
