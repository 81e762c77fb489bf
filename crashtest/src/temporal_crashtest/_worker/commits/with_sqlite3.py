"""sqlite3's commits: `sqlite3.connect` makes its connections of a subclass of the factory asked
for (its C methods call each other directly, so each is overridden where a write can end): the
rows a statement changed (`total_changes` before and after), then whether the connection is
still in a transaction — after each statement, `commit()`, `rollback()` and `with conn:`'s end."""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

from temporal_crashtest._worker.commits import rolled_back, settled, wrote


def _ran(conn: sqlite3.Connection, query: str, before: int) -> None:
    if conn.total_changes > before:
        wrote(conn, query)
    settled(conn, conn.in_transaction)


@functools.cache
def _watched_cursor(base: type[sqlite3.Cursor]) -> type[sqlite3.Cursor]:
    class Watched(base):  # type: ignore[valid-type,misc]
        def execute(self, sql: str, parameters: Any = (), /) -> Any:
            before = self.connection.total_changes
            out = super().execute(sql, parameters)
            _ran(self.connection, sql, before)
            return out

        def executemany(self, sql: str, parameters: Any, /) -> Any:
            before = self.connection.total_changes
            out = super().executemany(sql, parameters)
            _ran(self.connection, sql, before)
            return out

        def executescript(self, sql_script: str, /) -> Any:
            before = self.connection.total_changes
            out = super().executescript(sql_script)
            _ran(self.connection, sql_script, before)
            return out

    return Watched


@functools.cache
def _watched(base: type[sqlite3.Connection]) -> type[sqlite3.Connection]:
    class Watched(base):  # type: ignore[valid-type,misc]
        def cursor(self, factory: Any = sqlite3.Cursor) -> Any:
            return super().cursor(_watched_cursor(factory))

        def execute(self, sql: str, parameters: Any = (), /) -> Any:
            return self.cursor().execute(sql, parameters)

        def executemany(self, sql: str, parameters: Any, /) -> Any:
            return self.cursor().executemany(sql, parameters)

        def executescript(self, sql_script: str, /) -> Any:
            return self.cursor().executescript(sql_script)

        def commit(self) -> None:
            super().commit()
            settled(self, self.in_transaction)

        def rollback(self) -> None:
            super().rollback()
            rolled_back(self)

        def __exit__(self, kind: Any, error: Any, traceback: Any, /) -> Any:
            out = super().__exit__(kind, error, traceback)
            if kind is None:
                settled(self, self.in_transaction)
            else:
                rolled_back(self)
            return out

    return Watched


def install() -> None:
    connect = sqlite3.connect

    @functools.wraps(connect)
    def watched_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        if len(args) > 5:  # the factory given by position
            args = (*args[:5], _watched(args[5]), *args[6:])
        else:
            kwargs["factory"] = _watched(kwargs.get("factory") or sqlite3.Connection)
        return connect(*args, **kwargs)

    sqlite3.connect = watched_connect  # type: ignore[assignment]
    sqlite3.dbapi2.connect = watched_connect  # type: ignore[assignment]
