"""The grocery agent on the hand-rolled journal: six steps, one line each."""

from __future__ import annotations

import psycopg

from activities import steps
from activities.crash_points import CrashPoint
from activities.model import Model
from activities.models import Choice, EmailSent, OrderPlaced, PantryReport, Plan, Summary
from journal.engine import Design, Journal


async def run_agent(j: Journal, model: Model, household: str) -> Summary:
    run_id = j.run_id
    plan = await j.step(1, "plan", Plan, lambda c: steps.plan(c.conn, model, run_id, household, c.key))
    report = await j.step(2, "check_pantry", PantryReport, lambda c: steps.check_pantry(household, plan))
    choice = await j.step(3, "choose", Choice, lambda c: steps.choose(c.conn, model, run_id, report, c.key))
    order = await j.step(4, "place_order", OrderPlaced, lambda c: steps.place_order(c.conn, run_id, choice.lines, c.key), local=True)
    email = await j.step(5, "send_email", EmailSent, lambda c: steps.send_confirmation(c.conn, run_id, household, order, c.key), local=True)
    return await j.step(6, "summarise", Summary, lambda c: steps.summarise(c.conn, model, run_id, order, email, c.key))


async def run_to_completion(
    conn: psycopg.AsyncConnection,
    model: Model,
    run_id: str,
    design: Design,
    household: str,
    crash_at: CrashPoint | None = None,
) -> Summary:
    """Start or resume a run and drive it to the end."""
    journal = await Journal.open(conn, run_id, design, household, crash_at)
    summary = await run_agent(journal, model, household)
    await journal.finish(summary)
    return summary
