"""The payments activities: a read, a charge per invoice, a receipt. Each effect is a row in
Postgres; a keyed one is written at most once per key (`on conflict do nothing`)."""

from __future__ import annotations

import hashlib

import psycopg
from psycopg_pool import AsyncConnectionPool
from temporalio import activity

from examples.payments.workflow import Charge, ChargeInput, Invoice, PaymentRequest, ReceiptInput

SCHEMA = """
create table if not exists payment_charges (
    id bigserial primary key,
    workflow_id text not null,
    customer text not null,
    invoice text not null,
    amount_cents int not null,
    idempotency_key text unique
);
create table if not exists payment_receipts (
    id bigserial primary key,
    workflow_id text not null,
    recipient text not null,
    body text not null,
    idempotency_key text unique
);
"""


async def create_tables(conn: psycopg.AsyncConnection) -> None:
    async with conn.transaction():  # workers starting at once must not race on create table
        await conn.execute("select pg_advisory_xact_lock(hashtext('payments-schema'))")
        await conn.execute(SCHEMA)


def key() -> str:
    info = activity.info()
    return f"{info.workflow_id}:{info.activity_id}"


class PaymentActivities:
    def __init__(self, pool: AsyncConnectionPool, *, key_charges: bool) -> None:
        self.pool = pool
        self.key_charges = key_charges

    @activity.defn
    async def look_up_invoices(self, request: PaymentRequest) -> list[Invoice]:
        """Read-only: each invoice's amount (a stable made-up figure)."""
        return [
            Invoice(number, 500 + int(hashlib.sha256(number.encode()).hexdigest(), 16) % 5000)
            for number in request.invoices
        ]

    @activity.defn
    async def charge(self, data: ChargeInput) -> Charge:
        workflow_id = activity.info().workflow_id
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "insert into payment_charges"
                " (workflow_id, customer, invoice, amount_cents, idempotency_key)"
                " values (%s, %s, %s, %s, %s)"
                " on conflict (idempotency_key) do nothing returning id",
                (
                    workflow_id,
                    data.customer,
                    data.invoice.number,
                    data.invoice.amount_cents,
                    key() if self.key_charges else None,
                ),
            )
            row = await cur.fetchone()
            if row is None:  # charged before under this key: that charge stands
                cur = await conn.execute(
                    "select id from payment_charges where idempotency_key = %s", (key(),)
                )
                row = await cur.fetchone()
        assert row is not None
        return Charge(row[0], data.invoice.number, data.invoice.amount_cents)

    @activity.defn
    async def send_receipt(self, data: ReceiptInput) -> int:
        total = sum(c.amount_cents for c in data.charges)
        body = f"{len(data.charges)} invoices paid, {total / 100:.2f} in all"
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "insert into payment_receipts (workflow_id, recipient, body, idempotency_key)"
                " values (%s, %s, %s, %s) on conflict (idempotency_key) do nothing returning id",
                (activity.info().workflow_id, f"{data.customer}@example.com", body, key()),
            )
            row = await cur.fetchone()
            if row is None:
                cur = await conn.execute(
                    "select id from payment_receipts where idempotency_key = %s", (key(),)
                )
                row = await cur.fetchone()
        assert row is not None
        return int(row[0])
