"""What a run left behind, whichever engine ran it (run_id = the workflow id there): its rows in
Postgres, and its order at the grocer when ORDER_BACKEND=grocer.

The whole final state is read from Postgres in one round trip, the summary included: it is the
answer of the run's last `summarise` model call, which both engines record.
"""

from __future__ import annotations

import re

import psycopg
from pydantic import BaseModel

from agent.grocer import Grocer, configured_grocer
from agent.steps import STEPS, SUMMARISE, Effect, order_reference
from infra.db import connect_postgres, ensure_database_url

# One round trip: the counts and the content of a run's effects (parameters: `run_state_params`).
RUN_STATE_SQL = """
select
  (select count(*) from model_calls where run_id = %(r)s),
  (select coalesce(jsonb_agg(jsonb_build_object('id', id, 'items', items) order by id), '[]')
     from orders where run_id = %(r)s),
  (select coalesce(jsonb_agg(jsonb_build_object('id', id, 'recipient', recipient,
          'subject', subject, 'body', body) order by id), '[]')
     from emails where run_id = %(r)s),
  (select response->>'text' from model_calls where run_id = %(r)s and step = %(summarise)s
     order by id desc limit 1)
"""


# What one run leaves when each effect happens once: one paid call per model step, one order,
# one email.
ONE_RUN_COUNTS = (sum(1 for step in STEPS if step.effect is Effect.MODEL_CALL), 1, 1)


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


class OrderRow(BaseModel):
    id: int
    items: list[dict[str, object]]


class EmailRow(BaseModel):
    id: int
    recipient: str
    subject: str
    body: str


class RunState(BaseModel):
    run_id: str
    model_calls: int
    orders: list[OrderRow]
    emails: list[EmailRow]
    summary: str | None

    @classmethod
    def from_row(cls, run_id: str, row: tuple[object, ...]) -> RunState:
        """From the row RUN_STATE_SQL answers."""
        calls, orders, emails, summary = row
        return cls.model_validate(
            {
                "run_id": run_id,
                "model_calls": calls,
                "orders": orders,
                "emails": emails,
                "summary": summary,
            }
        )

    @property
    def counts(self) -> tuple[int, int, int]:
        return self.model_calls, len(self.orders), len(self.emails)

    def counts_text(self) -> str:
        nouns = ("model call", "order", "email")
        return ", ".join(plural(n, noun) for n, noun in zip(self.counts, nouns, strict=True))

    def exists(self) -> bool:
        return bool(self.model_calls or self.orders or self.emails or self.summary)

    def comparable(self) -> dict[str, object]:
        """The run's whole outcome with its own order ids replaced by a placeholder, so that two
        runs compare equal exactly when they ordered the same items, sent the same email naming
        their own order, and wrote the same summary. An email naming some other order id keeps
        that id, and so compares unequal."""

        def mask(text: str | None) -> str | None:
            if text is None:
                return None
            for order in self.orders:
                text = re.sub(rf"#{order.id}\b", "#<order>", text)
            return text

        return {
            "model_calls": self.model_calls,
            "orders": [order.items for order in self.orders],
            "emails": [(e.recipient, mask(e.subject), mask(e.body)) for e in self.emails],
            "summary": mask(self.summary),
        }


def run_state_params(run_id: str) -> dict[str, object]:
    return {"r": run_id, "summarise": SUMMARISE.number}


async def read_run_state(
    conn: psycopg.AsyncConnection, run_id: str, grocer: Grocer | None = None
) -> RunState:
    """With the grocer, the run's orders are the ones the grocer holds under its reference."""
    cur = await conn.execute(RUN_STATE_SQL, run_state_params(run_id))
    row = await cur.fetchone()
    assert row is not None
    state = RunState.from_row(run_id, row)
    if grocer is not None:
        placed = await grocer.client.find(order_reference(run_id))
        state.orders = [
            OrderRow(id=o.id, items=[line.model_dump() for line in o.lines]) for o in placed
        ]
    return state


async def final_state(workflow_id: str) -> dict[str, object]:
    """A run's final state as JSON (`make crashtest` observes it): what the household got (order
    items, the email naming its order, the summary) and what was paid for (model calls), with
    this run's own order ids masked."""
    async with configured_grocer() as grocer:
        async with await connect_postgres(ensure_database_url()) as conn:
            return (await read_run_state(conn, workflow_id, grocer)).comparable()
