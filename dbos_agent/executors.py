"""Executor ids that cannot collide: each DBOS process holds its own, in Postgres, while it runs.

DBOS's executor id says which process a pending run belongs to: a process that launches recovers
the pending runs of its own id. Two live processes with one id both run the other's runs (every
step paid twice), so an id is *held*: a session-level advisory lock on `(schema, id)`, taken on a
connection the process keeps open. Postgres releases it when the process dies (its connection
closes with it), so a restarted process takes the same id again and recovers its predecessor's
runs, as DBOS expects of a supervised fleet.

- `--executor-id ID`: that id, or one clear error if a live process holds it.
- no id: the first free of `{hostname}-0`, `{hostname}-1`, … — a restarted process takes the slot
  its dead predecessor left, and a second process beside a live one takes the next.

After a Postgres restart every lock is gone: the holder takes its id again as soon as the server
is back (`keep`), and a process that finds it taken meanwhile stops (`ExecutorTaken`): its runs
are the new holder's now.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass

import psycopg

from infra.db import connect_postgres
from infra.errors import AgentError, ConfigError, DatabaseUnavailable

log = logging.getLogger(__name__)

SLOTS = 64  # default ids tried per host before giving up
KEEP_EVERY_S = 1.0  # how often the holder checks its lock's connection
_TRY = "select pg_try_advisory_lock(hashtextextended(%s, 0))"


class ExecutorTaken(AgentError):
    """Another live process holds this executor id."""


def _lock_name(schema: str, executor_id: str) -> str:
    return f"dbos-executor:{schema}:{executor_id}"


def default_prefix() -> str:
    return socket.gethostname() or "local"


@dataclass
class HeldExecutor:
    """An executor id this process holds, and the connection that holds it."""

    executor_id: str
    url: str
    schema: str
    conn: psycopg.AsyncConnection

    async def _take(self, conn: psycopg.AsyncConnection) -> bool:
        row = await (
            await conn.execute(_TRY, (_lock_name(self.schema, self.executor_id),))
        ).fetchone()
        return bool(row and row[0])

    async def keep(self) -> None:
        """Hold the id for as long as this process runs: after a lost connection (a Postgres
        restart), take it again once the server is back. Raises `ExecutorTaken` if another
        process took it meanwhile."""
        while True:
            await asyncio.sleep(KEEP_EVERY_S)
            with contextlib.suppress(psycopg.Error, OSError):
                await self.conn.execute("select 1")
                continue
            with contextlib.suppress(DatabaseUnavailable, psycopg.Error, OSError):
                conn = await connect_postgres(self.url)
                if not await self._take(conn):
                    await conn.close()
                    raise ExecutorTaken(
                        f"executor id {self.executor_id} was taken by another process while "
                        "Postgres restarted: this process stops (its runs are that process's now)"
                    )
                with contextlib.suppress(psycopg.Error, OSError):
                    await self.conn.close()
                self.conn = conn
                log.info("executor id %s held again after a lost connection", self.executor_id)

    async def release(self) -> None:
        with contextlib.suppress(psycopg.Error, OSError):
            await self.conn.close()


async def hold_executor(url: str, schema: str, wanted: str | None) -> HeldExecutor:
    """Take `wanted` (None: the first free default slot) for this process, or raise
    ConfigError."""
    conn = await connect_postgres(url)
    try:
        names = [wanted] if wanted else [f"{default_prefix()}-{n}" for n in range(SLOTS)]
        for name in names:
            held = HeldExecutor(name, url, schema, conn)
            if await held._take(conn):
                return held
    except BaseException:
        await conn.close()
        raise
    await conn.close()
    if wanted:
        raise ConfigError(
            f"executor id {wanted} is held by another running process (on schema {schema}): two "
            "processes with one id would run each other's runs; give each its own --executor-id"
        )
    raise ConfigError(
        f"all {SLOTS} executor ids {default_prefix()}-0..{SLOTS - 1} are held by running "
        "processes: pass --executor-id"
    )
