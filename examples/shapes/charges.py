"""The activities most shapes share: charge an invoice, send a notice or its receipt, each keyed
as the worker factory says (`ledger.workflow_key`, a run-id key, or None: no key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg_pool import AsyncConnectionPool
from temporalio import activity

from examples.shapes.ledger import record

Key = Callable[[], str] | None


class ChargeActivities:
    def __init__(self, pool: AsyncConnectionPool, *, charge_key: Key, receipt_key: Key) -> None:
        self.pool = pool
        self.charge_key = charge_key
        self.receipt_key = receipt_key

    @activity.defn
    async def charge(self, invoice: str) -> str:
        await record(self.pool, f"charge {invoice}", self.charge_key and self.charge_key())
        return invoice

    @activity.defn
    async def send_receipt(self, invoice: str) -> None:
        await record(self.pool, f"receipt for {invoice}", self.receipt_key and self.receipt_key())

    @activity.defn
    async def send_notice(self, invoice: str) -> None:
        """A message before the charge's receipt, keyed as the receipt is."""
        await record(self.pool, f"notice for {invoice}", self.receipt_key and self.receipt_key())

    @activity.defn
    async def step(self, effect: str) -> None:
        """One activity type for every step, the effect named by its input: how agent frameworks
        run each model call or tool. Keyed as the receipt is."""
        await record(self.pool, effect, self.receipt_key and self.receipt_key())

    def all(self) -> list[Callable[..., Any]]:
        return [self.charge, self.send_notice, self.send_receipt, self.step]
