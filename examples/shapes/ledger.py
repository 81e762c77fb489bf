"""The examples' effects: one row per effect in Postgres, written at most once per idempotency key
(`on conflict do nothing`); an unkeyed effect is written every time it runs."""

from __future__ import annotations

import psycopg
from psycopg_pool import AsyncConnectionPool
from temporalio import activity

from infra.db import connect_postgres, ensure_database_url, open_pool

SCHEMA = """
create table if not exists example_effects (
    id bigserial primary key,
    workflow_id text not null,
    what text not null,
    idempotency_key text unique
);
create table if not exists example_marks (idempotency_key text primary key);
"""


async def create_table(conn: psycopg.AsyncConnection) -> None:
    async with conn.transaction():
        # Workers starting at once must not race on `create table`.
        await conn.execute("select pg_advisory_xact_lock(hashtext('example-effects'))")
        await conn.execute(SCHEMA)


async def open_ledger() -> AsyncConnectionPool:
    pool = await open_pool(ensure_database_url(), max_size=4)
    async with pool.connection() as conn:
        await create_table(conn)
    return pool


def workflow_key() -> str:
    """`{workflow_id}:{activity_id}`: unique within one run of one workflow id."""
    info = activity.info()
    return f"{info.workflow_id}:{info.activity_id}"


async def record_on(conn: psycopg.AsyncConnection, what: str, key: str | None) -> None:
    """Take the effect `what` for this activity's workflow, once per `key` (None: every time)."""
    await conn.execute(
        "insert into example_effects (workflow_id, what, idempotency_key) values (%s, %s, %s)"
        " on conflict (idempotency_key) do nothing",
        (activity.info().workflow_id, what, key),
    )


async def record(pool: AsyncConnectionPool, what: str, key: str | None) -> None:
    async with pool.connection() as conn:
        await record_on(conn, what, key)


def record_outside_an_activity(workflow_id: str, what: str) -> None:
    """Take the effect `what` for `workflow_id` from where no activity runs (workflow code, as
    a mistake to find), unkeyed: every call writes a row."""
    with psycopg.connect(ensure_database_url()) as conn:
        conn.execute(
            "insert into example_effects (workflow_id, what) values (%s, %s)", (workflow_id, what)
        )


async def effects_of(workflow_id: str) -> dict[str, list[str]]:
    """crashtest's OBSERVE: the effects of the run's whole tree, in the order they were taken.
    The examples derive a child's workflow id from its parent's (`{parent}/...`), so one prefix
    finds them all (a default child id is random: it could not be found from the root's)."""
    async with await connect_postgres(ensure_database_url()) as conn:
        cur = await conn.execute(
            "select what from example_effects where workflow_id = %s or workflow_id like %s"
            " order by id",
            (workflow_id, workflow_id.replace("%", r"\%").replace("_", r"\_") + "/%"),
        )
        return {"effects": [row[0] for row in await cur.fetchall()]}


async def effects_in_any_order(workflow_id: str) -> dict[str, list[str]]:
    """crashtest's OBSERVE for activities that run at once: the effects sorted (which row lands
    first is not part of the outcome; how many there are is)."""
    return {"effects": sorted((await effects_of(workflow_id))["effects"])}
