"""The grocery agent on the hand-rolled journal: six steps, one statement each."""

from __future__ import annotations

import psycopg

from agent import steps
from agent.data import Summary
from agent.grocer import Grocer
from agent.llm import Model
from agent.steps import CHECK_PANTRY, CHOOSE, PLACE_ORDER, PLAN, SEND_CONFIRMATION, SUMMARISE
from journal.crash_points import StepCrashPoint
from journal.engine import Design, Journal, Pause


async def run_agent(j: Journal, model: Model, household: str, grocer: Grocer | None) -> Summary:
    run_id = j.run_id
    plan = await j.step(PLAN, lambda c: steps.plan(c.conn, model, run_id, household, c.key))
    pantry = await j.step(CHECK_PANTRY, lambda c: steps.check_pantry(household, plan))
    choice = await j.step(CHOOSE, lambda c: steps.choose(c.conn, model, run_id, pantry, c.key))
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


async def run_to_completion(
    conn: psycopg.AsyncConnection,
    model: Model,
    run_id: str,
    design: Design,
    household: str,
    crash_at: StepCrashPoint | None = None,
    pause: Pause | None = None,
    grocer: Grocer | None = None,
) -> Summary:
    """Start or resume a run and drive it to the end (RunBusy if another process is on it)."""
    journal = await Journal.open(conn, run_id, design, household, crash_at, pause)
    try:
        summary = await run_agent(journal, model, household, grocer)
    except BaseException:
        await journal.release()
        raise
    await journal.finish(summary)
    return summary
