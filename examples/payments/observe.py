"""OBSERVE for crashtest: what a payments run left behind, as the customer would see it."""

from __future__ import annotations

from infra.db import connect_postgres, ensure_database_url


async def payments_of(workflow_id: str) -> dict[str, object]:
    """The run's charges (invoice, amount) and receipts (recipient, text): no ids, which differ
    from run to run."""
    async with await connect_postgres(ensure_database_url()) as conn:
        charges = await conn.execute(
            "select invoice, amount_cents from payment_charges where workflow_id = %s order by id",
            (workflow_id,),
        )
        receipts = await conn.execute(
            "select recipient, body from payment_receipts where workflow_id = %s order by id",
            (workflow_id,),
        )
        return {
            "charges": [list(row) for row in await charges.fetchall()],
            "receipts": [list(row) for row in await receipts.fetchall()],
        }
