"""The six steps of the grocery agent: declared once here, and written as plain async functions.

`STEPS` is the one list of steps: their number, name (the Temporal activity's name and the
journal's saved name), output type, and what effect each writes. Whatever names or counts the
steps elsewhere derives from it.

Side effects (`place_order`, `send_confirmation`) and model calls take an explicit idempotency
key; `None` means "no key" (the weaker designs), and a retry then creates a second row.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel

from agent.data import (
    Choice,
    EmailSent,
    OrderLine,
    OrderPlaced,
    PantryReport,
    Plan,
    PriceQuote,
    Summary,
)
from agent.effects import insert_once, log_effect
from agent.grocer import Grocer, GrocerOrder, OrderNotOurs
from agent.guardrails import PRICES_CENTS, check_budget, check_choice, money
from agent.llm import Model, call_model, make_prompt
from infra.metrics import EffectEvent


class Effect(StrEnum):
    """What a step writes that a repeat would write again."""

    NONE = "none"  # reads only
    MODEL_CALL = "model call"  # a paid call, recorded in model_calls
    DATABASE = "database"  # a row in our own database (an order, an email in the outbox)


Output = TypeVar("Output", bound=BaseModel)


@dataclass(frozen=True)
class Step(Generic[Output]):
    number: int
    name: str
    output: type[Output]
    effect: Effect


PLAN = Step(1, "plan", Plan, Effect.MODEL_CALL)
CHECK_PANTRY = Step(2, "check_pantry", PantryReport, Effect.NONE)
CHOOSE = Step(3, "choose", Choice, Effect.MODEL_CALL)
PLACE_ORDER = Step(4, "place_order", OrderPlaced, Effect.DATABASE)
SEND_CONFIRMATION = Step(5, "send_confirmation", EmailSent, Effect.DATABASE)
SUMMARISE = Step(6, "summarise", Summary, Effect.MODEL_CALL)
STEPS = (PLAN, CHECK_PANTRY, CHOOSE, PLACE_ORDER, SEND_CONFIRMATION, SUMMARISE)
STEP_NAMES = tuple(step.name for step in STEPS)
# The next version's step, between choose and place_order: its number is new (a number names a
# step, it does not count them). Temporal's workflow runs it behind a patch; the journal and
# DBOS run STEPS without it until their next versions ship.
CHECK_PRICES = Step(7, "check_prices", PriceQuote, Effect.NONE)


async def plan(
    conn: psycopg.AsyncConnection, model: Model, run_id: str, household: str, key: str | None
) -> Plan:
    prompt = make_prompt(
        PLAN.name,
        "List the staples this household should have in stock this week. Answer as JSON "
        '{"staples": [str], "note": str}.',
        {"household": household},
    )
    return await call_model(
        conn, model, run_id=run_id, step=PLAN.number, prompt=prompt, output_type=Plan, key=key
    )


async def check_pantry(household: str, plan: Plan) -> PantryReport:
    """Read-only: a third of the staples (a stable choice per household) are already in stock."""

    def stable(item: str) -> bytes:
        return hashlib.sha256(f"pantry|{household}|{item}".encode()).digest()

    ranked = sorted(plan.staples, key=stable)
    in_stock = set(ranked[: len(ranked) // 3])
    return PantryReport(
        have=[s for s in plan.staples if s in in_stock],
        missing=[s for s in plan.staples if s not in in_stock],
    )


async def check_prices(choice: Choice) -> PriceQuote:
    """Read-only: the order's cost at the price list, refused (not retried) over the budget."""
    lines = [
        f"{line.quantity} x {line.item} at {money(PRICES_CENTS[line.item])}"
        for line in choice.lines
    ]
    total = sum(PRICES_CENTS[line.item] * line.quantity for line in choice.lines)
    check_budget(total)
    return PriceQuote(total_cents=total, lines=lines)


async def choose(
    conn: psycopg.AsyncConnection, model: Model, run_id: str, pantry: PantryReport, key: str | None
) -> Choice:
    prompt = make_prompt(
        CHOOSE.name,
        "Choose what to order for the missing items. Answer as JSON "
        '{"lines": [{"item": str, "quantity": int}]}.',
        {"missing": pantry.missing},
    )
    choice = await call_model(
        conn, model, run_id=run_id, step=CHOOSE.number, prompt=prompt, output_type=Choice, key=key
    )
    check_choice(pantry, choice)  # before any order: what the household would pay for
    return choice


GROCER_ORDERS = "grocer_orders"  # the effect's name in logs and metrics: an order at the grocer


def order_reference(run_id: str) -> str:
    """The order's own id at the grocer: stable for the run, the same as its workflow-keyed
    idempotency key (`{workflow_id}:{activity_id}`; the journal's `{run_id}:{step}`)."""
    return f"{run_id}:{PLACE_ORDER.number}"


def _described(lines: list[OrderLine]) -> str:
    """The lines as a person reads them; a non-ASCII letter as its escape, so that a look-alike
    ('m\\u0456lk') does not read as the item it imitates."""
    text = ", ".join(f"{line.quantity} x {line.item}" for line in lines)
    return text.encode("ascii", "backslashreplace").decode("ascii")


def ours(found: list[GrocerOrder], lines: list[OrderLine], reference: str) -> GrocerOrder:
    """The order found under `reference` that is the one this step places: the same lines, as
    the request it would send. Any other is not confirmed: `OrderNotOurs`, naming both."""
    for order in found:
        if order.lines == lines:
            return order
    raise OrderNotOurs(
        f"the grocer holds {len(found)} order(s) under reference {reference} and none is the "
        f"one this run places: found {_described(found[0].lines)}; this run orders "
        f"{_described(lines)}"
    )


async def place_order(
    conn: psycopg.AsyncConnection,
    run_id: str,
    lines: list[OrderLine],
    key: str | None,
    grocer: Grocer | None = None,
) -> OrderPlaced:
    """Place the order, in our own table or at the grocer. With a key, a repeat returns the
    first order instead of a new one. At the grocer a key lives only its TTL, and any run of the
    business id may come after it (a late retry, a reset, a re-run, a start after the history's
    retention): so the order is first looked up by its reference (the effect check) and placed
    only if it is not there; one found counts only if it is this order."""
    if grocer is None:
        items = Jsonb([line.model_dump() for line in lines])
        order_id, stored = await insert_once(
            conn, "orders", {"run_id": run_id, "items": items}, key, ["id", "items"]
        )
        return OrderPlaced(order_id=order_id, lines=[OrderLine.model_validate(i) for i in stored])
    reference = order_reference(run_id)
    if grocer.effect_check:
        found = await grocer.client.find(reference)
        if found:
            order = ours(found, lines, reference)
            log_effect(
                EffectEvent.DUPLICATE_REFUSED,
                GROCER_ORDERS,
                key,
                order.id,
                run_id=run_id,
                how=f"found by reference {reference}",
            )
            return OrderPlaced(order_id=order.id, lines=order.lines)
    order = await grocer.client.place(reference, lines, key)
    if order.replayed:
        log_effect(
            EffectEvent.DUPLICATE_REFUSED,
            GROCER_ORDERS,
            key,
            order.id,
            run_id=run_id,
            how="the grocer replayed the key",
        )
    else:
        log_effect(EffectEvent.CREATED, GROCER_ORDERS, key, order.id, run_id=run_id)
    return OrderPlaced(order_id=order.id, lines=order.lines)


def recipient_for(household: str) -> str:
    return f"{household}@example.com"


async def send_confirmation(
    conn: psycopg.AsyncConnection,
    run_id: str,
    household: str,
    order: OrderPlaced,
    key: str | None,
) -> EmailSent:
    """Send the confirmation email (into the outbox table). With a key, a repeat sends nothing."""
    lines = "\n".join(f"- {line.quantity} x {line.item}" for line in order.lines)
    email = {
        "run_id": run_id,
        "recipient": recipient_for(household),
        "subject": f"Your grocery order #{order.order_id}",
        "body": f"Order #{order.order_id} is on its way:\n{lines}\n",
    }
    row = await insert_once(conn, "emails", email, key, ["id", "recipient", "subject", "body"])
    return EmailSent(email_id=row[0], recipient=row[1], subject=row[2], body=row[3])


async def summarise(
    conn: psycopg.AsyncConnection,
    model: Model,
    run_id: str,
    order: OrderPlaced,
    email: EmailSent,
    key: str | None,
) -> Summary:
    prompt = make_prompt(
        SUMMARISE.name,
        'Summarise this run for the household in one sentence. Answer as JSON {"text": str}.',
        {
            "order_id": order.order_id,
            "lines": [line.model_dump() for line in order.lines],
            "recipient": email.recipient,
        },
    )
    return await call_model(
        conn,
        model,
        run_id=run_id,
        step=SUMMARISE.number,
        prompt=prompt,
        output_type=Summary,
        key=key,
    )
