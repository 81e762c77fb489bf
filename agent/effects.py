"""Side effects by idempotency key: one insert-or-fetch helper serves every effect table.

A table that takes an effect has `idempotency_key text unique`. An insert with a key that was used
before inserts nothing and returns the first row instead; a `None` key (the weaker designs) never
conflicts, so a retry without a key creates a second row.

Every outcome is one log line on `agent.effects` (`log_effect`): an effect created, or a
duplicate refused (a retry that found the first one). The worker counts them (infra.metrics).
The line follows the insert: on an autocommit connection (the Temporal activities) the row is
committed by then; in the journal's transactional design it commits later, with its checkpoint,
so a process that dies in between leaves a "created" line for a row that was rolled back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import psycopg
from psycopg import sql

from infra.metrics import EFFECTS_LOGGER, EffectEvent

log = logging.getLogger(EFFECTS_LOGGER)


def log_effect(
    event: EffectEvent,
    effect: str,
    key: str | None,
    row_id: object,
    *,
    run_id: str | None = None,
    how: str | None = None,
) -> None:
    """One line per effect outcome, with fields a JSON log and the metrics count by."""
    if event is EffectEvent.CREATED:
        message = f"{effect}: created #{row_id} " + (f"under key {key}" if key else "with no key")
    else:
        message = f"{effect}: duplicate refused: key {key} already has #{row_id}"
    if how:
        message += f" ({how})"
    fields = {"event": event.value, "effect": effect, "idempotency_key": key, "row_id": row_id}
    log.info(message, extra={**fields, "run_id": run_id, "how": how})


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
    event = EffectEvent.CREATED
    if row is None:  # the key was used before (perhaps by a concurrent attempt): that row stands
        assert key is not None
        row = await find_by_key(conn, table, key, returning)
        assert row is not None
        event = EffectEvent.DUPLICATE_REFUSED
    row_id = row[list(returning).index("id")] if "id" in returning else None
    run_id = values.get("run_id")
    log_effect(event, table, key, row_id, run_id=run_id if isinstance(run_id, str) else None)
    return row
