"""asyncpg's commits (pools hand out proxies of the same connections; a transaction's commit and
rollback are statements run through `Connection.execute`): after each statement, the rows it
changed — by its command tag where asyncpg returns one (`execute`, a prepared statement's
`get_statusmsg`), by its SQL for `fetch*` and `executemany` — and whether the connection is
still in a transaction."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import asyncpg
from asyncpg.prepared_stmt import PreparedStatement

from temporal_crashtest._worker.commits import (
    WRITES,
    command_of,
    rolled_back,
    settled,
    tag_of,
    wrote,
)


def _after(conn: Any, query: str, command: str, rows: int) -> None:
    if command == "ROLLBACK" and not conn.is_in_transaction():
        rolled_back(conn)
    elif command in WRITES and rows > 0:
        wrote(conn, query)
    settled(conn, conn.is_in_transaction())


def _execute(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def execute(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        status = await original(self, query, *args, **kwargs)
        _after(self, query, *tag_of(status if isinstance(status, str) else None))
        return status

    return execute


def _by_sql(original: Callable[..., Any]) -> Callable[..., Any]:
    """`fetch*`, `executemany`: no tag; a statement that writes is taken to have written."""

    @functools.wraps(original)
    async def run(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        out = await original(self, query, *args, **kwargs)
        _after(self, query, command_of(query), 1)
        return out

    return run


def _prepared(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def run(self: PreparedStatement, *args: Any, **kwargs: Any) -> Any:
        out = await original(self, *args, **kwargs)
        _after(self._connection, self.get_query(), *tag_of(self.get_statusmsg()))
        return out

    return run


def install() -> None:
    connection = asyncpg.Connection
    connection.execute = _execute(connection.execute)
    for name in ("executemany", "fetch", "fetchrow", "fetchval", "fetchmany"):
        setattr(connection, name, _by_sql(getattr(connection, name)))
    for name in ("fetch", "fetchrow", "fetchval", "fetchmany", "executemany"):
        setattr(PreparedStatement, name, _prepared(getattr(PreparedStatement, name)))
