"""What DBOS counts as a database outage, widened to a Postgres on a Unix socket that is away.

DBOS waits out an outage in its own calls (`db_retry`: it records a step, reads the next one,
records the run's end) when `retriable_postgres_exception` says the error is a lost connection.
DBOS 3.4 knows psycopg's "connection failed: …" but not "connection is bad: connection to server
on socket … failed", which psycopg raises at once when the socket file is missing — as it is
while our embedded Postgres restarts. Such a call is not retried: the workflow that made it dies
in its process with the error, and its run sits PENDING until the process restarts (the crash
lab saw 9 runs of one process stuck that way after a Postgres restart, for the 300 s of the
stuck-run watch). `count_missing_socket_as_outage()` widens the test, once per process, before
DBOS launches.

Some of DBOS's calls are not retried at all: registering a queue (`upsert_queue`) raises at the
first lost connection, so a process started while Postgres restarts died of it, and the chaos
lab counted one restart more than it killed. `through_outage` waits such a call out, as
`infra.db.open_pool` waits for the first connection: up to 30 s, then one line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import dbos._sys_db as dbos_system_database
import psycopg
from sqlalchemy.exc import DBAPIError

from infra.errors import DatabaseUnavailable, first_line

_BAD_AT_CONNECT = "connection is bad:"  # psycopg's words when a connection fails to start
OUTAGE_WAIT_S = 30.0  # as long as `infra.db.open_pool` waits for a first connection
_RETRY_EVERY_S = 0.5
T = TypeVar("T")


def missing_socket(error: BaseException) -> bool:
    """Whether `error` is psycopg failing to start a connection (no SQL state: no server spoke)."""
    cause = error.orig if isinstance(error, DBAPIError) else error
    return (
        isinstance(cause, psycopg.OperationalError)
        and cause.sqlstate is None
        and str(cause).startswith(_BAD_AT_CONNECT)
    )


def an_outage(error: BaseException) -> bool:
    """Whether `error` is a lost or refused connection (DBOS's test, widened), not a bad call."""
    return isinstance(error, Exception) and dbos_system_database.retriable_postgres_exception(error)


def count_missing_socket_as_outage() -> None:
    """Make DBOS retry its own database calls on a missing socket too (idempotent)."""
    known: Callable[[Exception], bool] = dbos_system_database.retriable_postgres_exception
    if getattr(known, "counts_missing_socket", False):
        return

    def retriable(error: Exception) -> bool:
        return known(error) or missing_socket(error)

    retriable.counts_missing_socket = True  # type: ignore[attr-defined]
    dbos_system_database.retriable_postgres_exception = retriable  # type: ignore[assignment]


async def through_outage(
    call: Callable[[], Awaitable[T]], what: str, wait_s: float = OUTAGE_WAIT_S
) -> T:
    """`call()`, called again while it fails for an outage (`an_outage`), for up to `wait_s`;
    then one line (`DatabaseUnavailable`) saying `what` could not be done. Only for calls that
    are safe to repeat (an upsert)."""
    count_missing_socket_as_outage()
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return await call()
        except Exception as err:
            if not an_outage(err):
                raise
            if time.monotonic() >= deadline:
                cause = err.orig if isinstance(err, DBAPIError) and err.orig else err
                raise DatabaseUnavailable(
                    f"{what}: Postgres was away for {wait_s:g} s: {first_line(cause)}"
                ) from None
        await asyncio.sleep(_RETRY_EVERY_S)
