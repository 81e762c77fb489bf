"""`python commit_watch.py plain|watched`: what user code sees of psycopg (results,
row counts, status messages, errors), each way it commits — pipeline mode, COPY in and out, a
server-side cursor, autocommit, a connection used from several threads, `executemany` with
`returning`, a transaction block that raises, a failed statement, a closed connection, async
pipeline and COPY — printed as JSON, one object a line; `watched`: with crashtest's watch of the
commits installed, as in a worker, and the effects said during each operation. The project's
tests run it on their Postgres (tests/test_commit_watch.py)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

SAID: list[str] = []


class Attempt:
    """An activity attempt, as the crash interceptor marks one in a worker's context."""

    def made(self, what: str) -> None:
        SAID.append(what)

    def unseen(self, what: str) -> None:
        SAID.append(f"unseen {what}")


def see(label: str, seen: Callable[[], Any]) -> None:
    before = len(SAID)
    try:
        value = repr(seen())
    except Exception as err:  # what the user's code would see
        value = f"raised {type(err).__name__}: {err}"
    print(json.dumps({"op": label, "saw": value, "effects": len(SAID) - before}), flush=True)


async def see_async(label: str, seen: Callable[[], Awaitable[Any]]) -> None:
    before = len(SAID)
    try:
        value = repr(await seen())
    except Exception as err:
        value = f"raised {type(err).__name__}: {err}"
    print(json.dumps({"op": label, "saw": value, "effects": len(SAID) - before}), flush=True)


def sync_ways(conn: psycopg.Connection[Any]) -> None:
    conn.execute("drop table if exists watch_t; create table watch_t (a int, b text)")
    conn.commit()

    def pipeline() -> Any:
        with conn.pipeline():
            cur = conn.cursor()
            cur.execute("insert into watch_t values (1, 'x')")
            early = (cur.rowcount, cur.statusmessage)
            cur.execute("insert into watch_t values (2, 'y') returning a")
            count = conn.execute("select count(*) from watch_t")
        conn.commit()
        return early, cur.fetchall(), count.fetchall()

    def pipeline_autocommit() -> Any:
        conn.autocommit = True
        try:
            with conn.pipeline():
                cur = conn.execute("insert into watch_t values (3, 'z')")
                conn.execute("update watch_t set b = 'w' where a = 3")
            return cur.rowcount, conn.execute("select b from watch_t where a = 3").fetchall()
        finally:
            conn.autocommit = False

    def copy_in() -> Any:
        cur = conn.cursor()
        with cur.copy("COPY watch_t (a, b) FROM STDIN") as copy:
            copy.write_row((10, "c1"))
            copy.write_row((11, "c2"))
        seen = (cur.rowcount, cur.statusmessage)
        conn.commit()
        return seen

    def copy_out() -> Any:
        cur = conn.cursor()
        with cur.copy("COPY (select a from watch_t order by a) TO STDOUT") as copy:
            rows = list(copy.rows())
        conn.commit()
        return rows, cur.statusmessage

    def server_cursor() -> Any:
        with conn.cursor(name="watch_server_side") as cur:
            cur.execute("select a from watch_t order by a")
            first, rest = cur.fetchmany(2), cur.fetchall()
        conn.commit()
        return first, rest

    def autocommit() -> Any:
        conn.autocommit = True
        try:
            cur = conn.execute("update watch_t set b = 'auto' where a = 1")
            return cur.rowcount, cur.statusmessage, conn.info.transaction_status.name
        finally:
            conn.autocommit = False

    def threads() -> Any:
        counts: list[int] = []

        def work() -> None:
            counts.append(conn.execute("insert into watch_t values (20, 't')").rowcount)

        started = [threading.Thread(target=work) for _ in range(4)]
        for thread in started:
            thread.start()
        for thread in started:
            thread.join()
        conn.commit()
        return counts, conn.execute("select count(*) from watch_t where a = 20").fetchone()

    def executemany_returning() -> Any:
        cur = conn.cursor()
        cur.executemany(
            "insert into watch_t values (%s, %s) returning a", [(30, "m"), (31, "n")],
            returning=True,
        )  # fmt: skip
        rows = [cur.fetchone()]
        while cur.nextset():
            rows.append(cur.fetchone())
        conn.commit()
        return rows

    def a_block_that_raises() -> Any:
        try:
            with conn.transaction():
                conn.execute("insert into watch_t values (40, 'e')")
                raise ValueError("boom")
        except ValueError as err:
            return str(err), conn.execute("select count(*) from watch_t where a = 40").fetchone()

    def a_failed_statement() -> Any:
        try:
            conn.execute("insert into no_such_table_4242 values (1)")
        except psycopg.errors.UndefinedTable:
            conn.rollback()
            return "UndefinedTable"

    for label, way in [
        ("pipeline", pipeline),
        ("pipeline, autocommit", pipeline_autocommit),
        ("copy in", copy_in),
        ("copy out", copy_out),
        ("server-side cursor", server_cursor),
        ("autocommit", autocommit),
        ("threads", threads),
        ("executemany returning", executemany_returning),
        ("a block that raises", a_block_that_raises),
        ("a failed statement", a_failed_statement),
    ]:
        see(label, way)


async def async_ways(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url) as conn:

        async def pipeline() -> Any:
            async with conn.pipeline():
                cur = await conn.execute("insert into watch_t values (50, 'ap')")
                count = await conn.execute("select count(*) from watch_t where a = 50")
            await conn.commit()
            return cur.rowcount, await count.fetchall()

        async def copy_in() -> Any:
            cur = conn.cursor()
            async with cur.copy("COPY watch_t (a, b) FROM STDIN") as copy:
                await copy.write_row((60, "ac"))
            await conn.commit()
            return cur.rowcount

        await see_async("async pipeline", pipeline)
        await see_async("async copy in", copy_in)


def main(mode: str) -> None:
    if mode == "watched":
        from temporal_crashtest._worker.effects import attempting
        from temporal_crashtest._worker.process import watch_effects

        watch_effects()
        attempting(Attempt())
    url = os.environ["DATABASE_URL"]
    with psycopg.connect(url) as conn:
        sync_ways(conn)
    closed = psycopg.connect(url)
    closed.close()
    see("a closed connection", lambda: closed.execute("select 1"))
    asyncio.run(async_ways(url))


if __name__ == "__main__":
    main(sys.argv[1])
