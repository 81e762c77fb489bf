"""psycopg 3's commits, sync and async (pools hand out the same connections): after each
statement a cursor runs, the rows it changed; after it, `commit()`, `rollback()` and a
`transaction()` block's end, whether the connection is still in a transaction."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import pq, sql

from temporal_crashtest._commits import WRITES, rolled_back, settled, tag_of, wrote

_IDLE = pq.TransactionStatus.IDLE
_FAILED = pq.TransactionStatus.INERROR


def _in_transaction(conn: psycopg.BaseConnection[Any]) -> bool:
    return conn.closed or conn.info.transaction_status != _IDLE


def _text(query: Any, cursor: Any) -> str:
    if isinstance(query, bytes):
        return query.decode("utf-8", "replace")
    if isinstance(query, sql.Composable):
        try:
            return query.as_string(cursor)
        except Exception:  # a query it cannot render is still a write, of "a table"
            return ""
    return str(query)


def _ran(cursor: Any, query: Any, *rest: Any) -> None:
    command, _ = tag_of(cursor.statusmessage)
    conn = cursor.connection
    if command in WRITES and cursor.rowcount > 0:
        wrote(conn, _text(query, cursor))
    settled(conn, _in_transaction(conn))


def _ended(conn: Any, failed: bool) -> None:
    if failed:
        if not _in_transaction(conn):
            rolled_back(conn)
    else:
        settled(conn, _in_transaction(conn))


def _sync(original: Callable[..., Any], after: Callable[..., None]) -> Callable[..., Any]:
    @functools.wraps(original)
    def watched(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        after(self, *(args or (kwargs.get("query"),)))
        return out

    return watched


def _async(original: Callable[..., Any], after: Callable[..., None]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def watched(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = await original(self, *args, **kwargs)
        after(self, *(args or (kwargs.get("query"),)))
        return out

    return watched


def _ending(conn: Any, args: tuple[Any, ...]) -> tuple[Any, bool]:
    """The connection a commit or a block's end is on, and whether it ends rolled back: an
    exception leaving the block (`__exit__`'s first argument), or a transaction failed already."""
    return conn, bool(args and args[0] is not None) or conn.info.transaction_status == _FAILED


def _sync_end(original: Callable[..., Any], of: Callable[[Any], Any]) -> Callable[..., Any]:
    """A commit or a block's end (a failure in it ends it rolled back)."""

    @functools.wraps(original)
    def watched(self: Any, *args: Any) -> Any:
        conn, failed = _ending(of(self), args)
        try:
            out = original(self, *args)
        except BaseException:
            _ended(conn, failed=True)
            raise
        _ended(conn, failed)
        return out

    return watched


def _async_end(original: Callable[..., Any], of: Callable[[Any], Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def watched(self: Any, *args: Any) -> Any:
        conn, failed = _ending(of(self), args)
        try:
            out = await original(self, *args)
        except BaseException:
            _ended(conn, failed=True)
            raise
        _ended(conn, failed)
        return out

    return watched


def _its_connection(transaction: Any) -> Any:
    return transaction.connection


def _itself(conn: Any) -> Any:
    return conn


def _forget(conn: Any, *args: Any) -> None:
    rolled_back(conn)


def install() -> None:
    for name in ("execute", "executemany"):
        setattr(psycopg.Cursor, name, _sync(getattr(psycopg.Cursor, name), _ran))
        setattr(psycopg.AsyncCursor, name, _async(getattr(psycopg.AsyncCursor, name), _ran))
    psycopg.Connection.commit = _sync_end(psycopg.Connection.commit, _itself)  # type: ignore[method-assign]
    psycopg.AsyncConnection.commit = _async_end(psycopg.AsyncConnection.commit, _itself)  # type: ignore[method-assign]
    psycopg.Connection.rollback = _sync(psycopg.Connection.rollback, _forget)  # type: ignore[method-assign]
    psycopg.AsyncConnection.rollback = _async(psycopg.AsyncConnection.rollback, _forget)  # type: ignore[method-assign]
    psycopg.Transaction.__exit__ = _sync_end(psycopg.Transaction.__exit__, _its_connection)  # type: ignore[method-assign]
    psycopg.AsyncTransaction.__aexit__ = _async_end(  # type: ignore[method-assign]
        psycopg.AsyncTransaction.__aexit__, _its_connection
    )
