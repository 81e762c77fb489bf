"""Look it up, do it, mark it done — through every database library crashtest watches, and an
effect it cannot see marked by hand.

Each activity looks its key up among the keys it marked done, places an order, then marks the
key done: the order and the mark each a committed transaction, each an effect crashtest kills
after (`effect:N.1`, `effect:N.2`) with no line of crashtest in the activities:

1. `psycopg_order`: psycopg 3 (async, a pool, autocommit);
2. `asyncpg_order`: asyncpg, the order in a transaction block;
3. `sqlalchemy_order`: a SQLAlchemy session over psycopg, in a thread (a sync activity);
4. `sqlite_order`: sqlite3, a local activity (sync, in a thread);
5. `file_order`: an order appended to a file, which no library tells crashtest of: the
   activity says it with `temporal_crashtest.effect`.

`unkeyed_worker`: a kill between an order and its mark orders again (✗ at each `effect:N.1`);
`keyed_worker`: each order carries the key, which its store refuses twice (✓).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The drivers are the activities' (their C extensions must not be imported again by the sandbox).
with workflow.unsafe.imports_passed_through():
    import asyncpg
    from psycopg_pool import AsyncConnectionPool
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session
    from temporal_crashtest import effect

    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.ledger import effects_of, record_on, workflow_key
    from infra.config import data_dir
    from infra.db import ensure_database_url

# The ledger's insert (`ledger.record_on`) and look-up in each driver's placeholders.
INSERT = (
    "insert into example_effects (workflow_id, what, idempotency_key) values ({})"
    " on conflict (idempotency_key) do nothing"
)
MARKED = "select 1 from example_marks where idempotency_key = {}"
SQLITE_SCHEMA = """
create table if not exists orders (workflow_id text, what text, idempotency_key text unique);
create table if not exists marks (idempotency_key text primary key);
"""


def _sqlite_path() -> Path:
    return data_dir() / "example-orders.sqlite"


def _file_path() -> Path:
    return data_dir() / "example-orders.jsonl"


class KindActivities:
    def __init__(self, pool: AsyncConnectionPool, keyed: bool) -> None:
        self.pool, self.keyed = pool, keyed
        self.url = ensure_database_url()

    def _key(self) -> str | None:
        return workflow_key() if self.keyed else None

    @activity.defn
    async def psycopg_order(self, item: str) -> None:
        key = workflow_key()
        async with self.pool.connection() as conn:
            marked = await conn.execute(MARKED.format("%s"), (key,))
            if await marked.fetchone() is None:
                await record_on(conn, f"psycopg {item}", self._key())
                await conn.execute("insert into example_marks values (%s)", (key,))

    @activity.defn
    async def asyncpg_order(self, item: str) -> None:
        key, info = workflow_key(), activity.info()
        conn = await asyncpg.connect(dsn=self.url)
        try:
            if await conn.fetchval(MARKED.format("$1"), key):
                return
            async with conn.transaction():
                await conn.execute(
                    INSERT.format("$1, $2, $3"),
                    info.workflow_id,
                    f"asyncpg {item}",
                    self._key(),
                )
            await conn.execute("insert into example_marks values ($1)", key)
        finally:
            await conn.close()

    @activity.defn
    def sqlalchemy_order(self, item: str) -> None:
        key, info = workflow_key(), activity.info()
        engine = create_engine(self.url.replace("postgresql://", "postgresql+psycopg://", 1))
        try:
            with Session(engine) as session:
                if session.execute(text(MARKED.format(":key")), {"key": key}).first():
                    return
                session.execute(
                    text(INSERT.format(":w, :what, :k")),
                    {"w": info.workflow_id, "what": f"sqlalchemy {item}", "k": self._key()},
                )
                session.commit()
                session.execute(text("insert into example_marks values (:key)"), {"key": key})
                session.commit()
        finally:
            engine.dispose()

    @activity.defn
    def sqlite_order(self, item: str) -> None:
        key, info = workflow_key(), activity.info()
        with closing(sqlite3.connect(_sqlite_path(), timeout=30)) as conn:
            if conn.execute("select 1 from marks where idempotency_key = ?", (key,)).fetchone():
                return
            conn.execute(
                "insert or ignore into orders values (?, ?, ?)",
                (info.workflow_id, f"sqlite {item}", self._key()),
            )
            conn.commit()
            conn.execute("insert into marks values (?)", (key,))
            conn.commit()

    @activity.defn
    async def file_order(self, item: str) -> None:
        key, info = workflow_key(), activity.info()
        async with self.pool.connection() as conn:
            marked = await conn.execute(MARKED.format("%s"), (key,))
            if await marked.fetchone() is not None:
                return
            line = {"workflow_id": info.workflow_id, "what": f"file {item}", "key": self._key()}
            await asyncio.to_thread(_append, json.dumps(line))
            effect("order file")
            await conn.execute("insert into example_marks values (%s)", (key,))

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.psycopg_order,
            self.asyncpg_order,
            self.sqlalchemy_order,
            self.sqlite_order,
            self.file_order,
        ]


def _append(line: str) -> None:
    with _file_path().open("a") as orders:
        orders.write(line + "\n")


@workflow.defn
class EveryKind:
    @workflow.run
    async def run(self, item: str) -> None:
        await workflow.execute_activity_method(KindActivities.psycopg_order, item, **OPTIONS)
        await workflow.execute_activity_method(KindActivities.asyncpg_order, item, **OPTIONS)
        await workflow.execute_activity_method(KindActivities.sqlalchemy_order, item, **OPTIONS)
        await workflow.execute_local_activity_method(
            KindActivities.sqlite_order,
            item,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=OPTIONS["retry_policy"],
        )
        await workflow.execute_activity_method(KindActivities.file_order, item, **OPTIONS)


async def _worker(client: Client, task_queue: str, keyed: bool) -> Worker:
    with closing(sqlite3.connect(_sqlite_path(), timeout=30)) as conn:
        conn.executescript(SQLITE_SCHEMA)
    return await shape_worker(
        client,
        task_queue,
        [EveryKind],
        lambda pool: KindActivities(pool, keyed).all(),
        activity_executor=ThreadPoolExecutor(4),
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await _worker(client, task_queue, keyed=False)


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await _worker(client, task_queue, keyed=True)


def _file_orders(workflow_id: str) -> Iterator[str]:
    """The file's orders for the run, each key once (its receiver refuses a repeat)."""
    if not _file_path().exists():
        return
    keys: set[str] = set()
    for line in _file_path().read_text().splitlines():
        order = json.loads(line)
        if order["workflow_id"] == workflow_id and order["key"] not in keys:
            keys.update([order["key"]] if order["key"] else [])
            yield order["what"]


async def orders_of(workflow_id: str) -> dict[str, list[str]]:
    """crashtest's OBSERVE: the run's orders in every store, in the workflow's order."""
    with closing(sqlite3.connect(_sqlite_path(), timeout=30)) as conn:
        rows = conn.execute("select what from orders where workflow_id = ?", (workflow_id,))
        in_sqlite = [what for (what,) in rows]
    in_postgres = (await effects_of(workflow_id))["effects"]
    return {"orders": [*in_postgres, *in_sqlite, *_file_orders(workflow_id)]}
