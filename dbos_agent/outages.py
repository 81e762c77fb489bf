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
"""

from __future__ import annotations

from collections.abc import Callable

import dbos._sys_db as dbos_system_database
import psycopg
from sqlalchemy.exc import DBAPIError

_BAD_AT_CONNECT = "connection is bad:"  # psycopg's words when a connection fails to start


def missing_socket(error: BaseException) -> bool:
    """Whether `error` is psycopg failing to start a connection (no SQL state: no server spoke)."""
    cause = error.orig if isinstance(error, DBAPIError) else error
    return (
        isinstance(cause, psycopg.OperationalError)
        and cause.sqlstate is None
        and str(cause).startswith(_BAD_AT_CONNECT)
    )


def count_missing_socket_as_outage() -> None:
    """Make DBOS retry its own database calls on a missing socket too (idempotent)."""
    known: Callable[[Exception], bool] = dbos_system_database.retriable_postgres_exception
    if getattr(known, "counts_missing_socket", False):
        return

    def retriable(error: Exception) -> bool:
        return known(error) or missing_socket(error)

    retriable.counts_missing_socket = True  # type: ignore[attr-defined]
    dbos_system_database.retriable_postgres_exception = retriable  # type: ignore[assignment]
