"""The grocer's orders and idempotency keys, in Postgres."""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import datetime
from importlib import resources

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, Field, StrictInt

MAX_QUANTITY = 100
MAX_LINES = 50
# Printable text: no NUL or other control characters (Postgres text cannot hold NUL).
PRINTABLE = r"^[^\x00-\x1f\x7f]+$"
MAX_KEY_CHARS = 255
MAX_REFERENCE_CHARS = 200

_SCHEMA_LOCK_ID = 0x67726372  # "grcr": concurrent starts create the schema once


class Line(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    item: str = Field(min_length=1, max_length=100, pattern=PRINTABLE)
    quantity: StrictInt = Field(ge=1, le=MAX_QUANTITY)  # not "3", 2.0 or true


class OrderRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    reference: str = Field(min_length=1, max_length=MAX_REFERENCE_CHARS, pattern=PRINTABLE)
    lines: list[Line] = Field(min_length=1, max_length=MAX_LINES)

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.model_dump(), sort_keys=True).encode()).hexdigest()


class Order(BaseModel):  # what the grocer answers: the account is the caller's own
    id: int
    reference: str
    lines: list[Line]
    created_at: datetime


class KeyReused(Exception):
    """The idempotency key was used, within its TTL, for another request."""


_ORDER = "id, reference, lines, created_at"


def _scoped(account: str, key: str) -> str:
    """An idempotency key as stored: within its account (account names hold no `/`)."""
    return f"{account}/{key}"


def _order(row: tuple[object, ...]) -> Order:
    return Order.model_validate(
        dict(zip(("id", "reference", "lines", "created_at"), row, strict=True))
    )


class Store:
    def __init__(self, pool: AsyncConnectionPool, key_ttl_s: float) -> None:
        self.pool = pool
        self.key_ttl_s = key_ttl_s

    async def ensure_schema(self) -> None:
        sql = resources.files("grocer").joinpath("schema.sql").read_text()
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute("select pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_ID,))
            await conn.execute(sql)

    async def place(
        self, account: str, request: OrderRequest, key: str | None
    ) -> tuple[Order, bool]:
        """The account's order, and whether it is a replay of an earlier request with the same
        key."""
        async with self.pool.connection() as conn, conn.transaction():
            if key is not None:
                replay = await self._replay(conn, account, key, request)
                if replay is not None:
                    return replay, True
            cur = await conn.execute(
                "insert into grocer.orders (account, reference, lines) values (%s, %s, %s)"
                f" returning {_ORDER}",
                (account, request.reference, Jsonb([line.model_dump() for line in request.lines])),
            )
            row = await cur.fetchone()
            assert row is not None
            order = _order(row)
            if key is not None:  # remembered from now on, for the TTL
                await conn.execute(
                    "insert into grocer.idempotency_keys (key, request_hash, order_id)"
                    " values (%s, %s, %s) on conflict (key) do update set"
                    " request_hash = excluded.request_hash, order_id = excluded.order_id,"
                    " created_at = now()",
                    (_scoped(account, key), request.fingerprint(), order.id),
                )
        return order, False

    async def _replay(
        self, conn: psycopg.AsyncConnection, account: str, key: str, request: OrderRequest
    ) -> Order | None:
        """The order a live key was used for (None if the key is new or expired)."""
        scoped = _scoped(account, key)
        # Repeats of one key, at the same moment, wait for each other here.
        await conn.execute("select pg_advisory_xact_lock(hashtextextended(%s, 7))", (scoped,))
        cur = await conn.execute(
            f"select k.request_hash, {', '.join('o.' + c for c in _ORDER.split(', '))}"
            " from grocer.idempotency_keys k join grocer.orders o on o.id = k.order_id"
            " where k.key = %s and k.created_at > now() - make_interval(secs => %s)",
            (scoped, self.key_ttl_s),
        )
        row = await cur.fetchone()
        if row is None:
            return None
        if row[0] != request.fingerprint():
            raise KeyReused(f"idempotency key {key!r} was used for another request")
        return _order(row[1:])

    async def by_reference(self, account: str, reference: str) -> list[Order]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                f"select {_ORDER} from grocer.orders where account = %s and reference = %s"
                " order by id",
                (account, reference),
            )
            return [_order(row) for row in await cur.fetchall()]

    async def healthy(self) -> bool:
        """Whether its database answers, within a second."""
        try:
            async with asyncio.timeout(1.0), self.pool.connection(timeout=1.0) as conn:
                await conn.execute("select 1")
        except (psycopg.Error, TimeoutError, OSError):
            return False
        return True
