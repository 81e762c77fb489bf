"""The six steps of the grocery agent, as plain async functions.

Side effects (`place_order`, `send_email`) and model calls take an explicit idempotency key;
`None` means "no key" (the weaker designs), and a retry then creates a second row.
"""

from __future__ import annotations

import hashlib

import psycopg
from psycopg.types.json import Jsonb

from activities.model import Model, call_model, make_prompt
from activities.models import (
    Choice,
    EmailSent,
    OrderLine,
    OrderPlaced,
    PantryReport,
    Plan,
    Summary,
)

STEP_NAMES = ("plan", "check_pantry", "choose", "place_order", "send_email", "summarise")


async def plan(
    conn: psycopg.AsyncConnection, model: Model, run_id: str, household: str, key: str | None
) -> Plan:
    prompt = make_prompt(
        "plan",
        "List the staples this household should have in stock this week. Answer as JSON "
        '{"staples": [str], "note": str}.',
        {"household": household},
    )
    return await call_model(
        conn, model, run_id=run_id, step=1, prompt=prompt, output_type=Plan, key=key
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


async def choose(
    conn: psycopg.AsyncConnection, model: Model, run_id: str, pantry: PantryReport, key: str | None
) -> Choice:
    prompt = make_prompt(
        "choose",
        "Choose what to order for the missing items. Answer as JSON "
        '{"lines": [{"item": str, "quantity": int}]}.',
        {"missing": pantry.missing},
    )
    return await call_model(
        conn, model, run_id=run_id, step=3, prompt=prompt, output_type=Choice, key=key
    )


async def place_order(
    conn: psycopg.AsyncConnection, run_id: str, lines: list[OrderLine], key: str | None
) -> OrderPlaced:
    """Place the order. With a key, a second call returns the first order instead of a new one."""
    items = Jsonb([line.model_dump() for line in lines])
    cur = await conn.execute(
        "insert into orders (run_id, items, idempotency_key) values (%s, %s, %s)"
        " on conflict (idempotency_key) do nothing returning id, items",
        (run_id, items, key),
    )
    row = await cur.fetchone()
    if row is None:  # the key was used before: this order already exists
        cur = await conn.execute("select id, items from orders where idempotency_key = %s", (key,))
        row = await cur.fetchone()
        assert row is not None
    return OrderPlaced(order_id=row[0], lines=[OrderLine.model_validate(i) for i in row[1]])


async def send_email(
    conn: psycopg.AsyncConnection,
    run_id: str,
    recipient: str,
    subject: str,
    body: str,
    key: str | None,
) -> EmailSent:
    """Send an email (into the outbox table). With a key, a second call sends nothing."""
    cur = await conn.execute(
        "insert into emails (run_id, recipient, subject, body, idempotency_key)"
        " values (%s, %s, %s, %s, %s)"
        " on conflict (idempotency_key) do nothing returning id, recipient, subject, body",
        (run_id, recipient, subject, body, key),
    )
    row = await cur.fetchone()
    if row is None:
        cur = await conn.execute(
            "select id, recipient, subject, body from emails where idempotency_key = %s", (key,)
        )
        row = await cur.fetchone()
        assert row is not None
    return EmailSent(email_id=row[0], recipient=row[1], subject=row[2], body=row[3])


def recipient_for(household: str) -> str:
    return f"{household}@example.com"


async def send_confirmation(
    conn: psycopg.AsyncConnection,
    run_id: str,
    household: str,
    order: OrderPlaced,
    key: str | None,
) -> EmailSent:
    lines = "\n".join(f"- {line.quantity} x {line.item}" for line in order.lines)
    return await send_email(
        conn,
        run_id,
        recipient_for(household),
        f"Your grocery order #{order.order_id}",
        f"Order #{order.order_id} is on its way:\n{lines}\n",
        key,
    )


async def summarise(
    conn: psycopg.AsyncConnection,
    model: Model,
    run_id: str,
    order: OrderPlaced,
    email: EmailSent,
    key: str | None,
) -> Summary:
    prompt = make_prompt(
        "summarise",
        'Summarise this run for the household in one sentence. Answer as JSON {"text": str}.',
        {
            "order_id": order.order_id,
            "lines": [line.model_dump() for line in order.lines],
            "recipient": email.recipient,
        },
    )
    return await call_model(
        conn, model, run_id=run_id, step=6, prompt=prompt, output_type=Summary, key=key
    )
