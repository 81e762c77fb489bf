"""psycopg 3's commits, sync and async (pools hand out the same connections): after each
statement a cursor runs, the rows it changed (in pipeline mode, where they are known only later,
each statement that writes is taken to have written); after a `COPY ... FROM` block, the rows it
copied in; after `commit()`, `rollback()`, a `transaction()` block's end and a pipeline's sync
or end, whether the connection is still in a transaction."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import psycopg
from psycopg import pq, sql

from temporal_crashtest._worker.commits import (
    WRITES,
    command_of,
    copies_out,
    rolled_back,
    settled,
    tag_of,
    wrote,
)

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
    conn = cursor.connection
    text = _text(query, cursor)
    if getattr(conn, "_pipeline", None) is not None:  # its results come at the next sync
        if command_of(text) in WRITES and not copies_out(text):
            wrote(conn, text)
        return
    command, _ = tag_of(cursor.statusmessage)
    if command in WRITES and cursor.rowcount > 0 and not copies_out(text):
        wrote(conn, text)
    settled(conn, _in_transaction(conn))


def _synced(pipeline: Any, *rest: Any) -> None:
    conn = pipeline._conn
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


def _its_pipelines_connection(pipeline: Any) -> Any:
    return pipeline._conn


def _watched_copy(original: Callable[..., Any]) -> Callable[..., Any]:
    """`Cursor.copy`: once its block ends, the rows a `COPY ... FROM` copied in."""

    @contextlib.contextmanager
    def copy(self: Any, statement: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with original(self, statement, *args, **kwargs) as copying:
            yield copying
        _ran(self, statement)

    return copy


def _watched_async_copy(original: Callable[..., Any]) -> Callable[..., Any]:
    @contextlib.asynccontextmanager
    async def copy(self: Any, statement: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with original(self, statement, *args, **kwargs) as copying:
            yield copying
        _ran(self, statement)

    return copy


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
    pipeline, async_pipeline = psycopg.Pipeline, psycopg.AsyncPipeline
    pipeline.sync = _sync(pipeline.sync, _synced)  # type: ignore[method-assign]
    async_pipeline.sync = _async(async_pipeline.sync, _synced)  # type: ignore[method-assign]
    pipeline.__exit__ = _sync_end(pipeline.__exit__, _its_pipelines_connection)  # type: ignore[method-assign]
    async_pipeline.__aexit__ = _async_end(  # type: ignore[method-assign]
        async_pipeline.__aexit__, _its_pipelines_connection
    )
    psycopg.Cursor.copy = _watched_copy(psycopg.Cursor.copy)  # type: ignore[method-assign]
    psycopg.AsyncCursor.copy = _watched_async_copy(psycopg.AsyncCursor.copy)  # type: ignore[method-assign]
