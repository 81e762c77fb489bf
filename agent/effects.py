"""Side effects by idempotency key: one insert-or-fetch helper serves every effect table.

A table that takes an effect has `idempotency_key text unique`. An insert with a key that was used
before inserts nothing and returns the first row instead; a `None` key (the weaker designs) never
conflicts, so a retry without a key creates a second row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import psycopg
from psycopg import sql


@cache
def _insert(table: str, columns: tuple[str, ...], returning: tuple[str, ...]) -> sql.Composed:
    return sql.SQL(
        "insert into {table} ({columns}, idempotency_key) values ({values}, %s)"
        " on conflict (idempotency_key) do nothing returning {returning}"
    ).format(
        table=sql.Identifier(table),
        columns=sql.SQL(", ").join(map(sql.Identifier, columns)),
        values=sql.SQL(", ").join(sql.Placeholder() * len(columns)),
        returning=sql.SQL(", ").join(map(sql.Identifier, returning)),
    )


@cache
def _select(table: str, returning: tuple[str, ...]) -> sql.Composed:
    return sql.SQL("select {returning} from {table} where idempotency_key = %s").format(
        table=sql.Identifier(table), returning=sql.SQL(", ").join(map(sql.Identifier, returning))
    )


async def find_by_key(
    conn: psycopg.AsyncConnection, table: str, key: str, returning: Sequence[str]
) -> tuple[Any, ...] | None:
    """The row an earlier attempt wrote under `key`, if any."""
    cur = await conn.execute(_select(table, tuple(returning)), (key,))
    return await cur.fetchone()


async def insert_once(
    conn: psycopg.AsyncConnection,
    table: str,
    values: Mapping[str, object],
    key: str | None,
    returning: Sequence[str],
) -> tuple[Any, ...]:
    """Insert a row, or, if `key` was used before, return the row that used it."""
    cur = await conn.execute(
        _insert(table, tuple(values), tuple(returning)), (*values.values(), key)
    )
    row = await cur.fetchone()
    if row is None:  # the key was used before (perhaps by a concurrent attempt): that row stands
        assert key is not None
        row = await find_by_key(conn, table, key, returning)
        assert row is not None
    return row
