"""`python -m dbos_agent run --run-id R [--design keyed|none]`: run one grocery agent run on DBOS;
`python -m dbos_agent serve`: run the runs enqueued on DBOS's `grocery` queue until SIGTERM.

The process launches DBOS on the application's own Postgres (`DATABASE_URL`; DBOS's tables in
the schema `dbos`), which first recovers the workflows this executor left pending — what a DBOS
application does when it starts after a crash — then starts the run under its workflow id (a
business id: starting it again returns the same workflow, it does not run it twice), waits for
its end and prints what it left. `--executor-id` names the process to DBOS: a process recovers
the workflows its executor id left pending (give each process of a fleet its own); every process
on one `--schema` shares DBOS's queue of recovered work (one application).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal

import psycopg
from dbos import DBOS, DBOSConfig, SetWorkflowID
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from agent.grocer import configured_grocer
from agent.llm import model_from_env
from agent.outcome import read_run_state
from dbos_agent.agent import (
    QUEUE_CONCURRENCY,
    QUEUE_NAME,
    DBOSRequest,
    Dependencies,
    KeyDesign,
    grocery_agent,
    use,
)
from infra.cli import run_main
from infra.config import env_number
from infra.db import connect_postgres, ensure_database_url, ensure_schema, open_pool

APP = "grocery-agent"
SCHEMA = "dbos"  # DBOS's system tables, in the application's own database
DEFAULT_HOUSEHOLD = "household-1"
DEFAULT_STUCK_AFTER_S = 300.0  # longer than any step takes (a model call, an order)
log = logging.getLogger(__name__)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m dbos_agent", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run (or recover) one agent run")
    run.add_argument("--run-id", required=True, help="the workflow id (a business id)")
    run.add_argument("--design", default="keyed", help=" | ".join(d.value for d in KeyDesign))
    run.add_argument("--household", default=DEFAULT_HOUSEHOLD)
    run.add_argument("--executor-id", default="local", help="this process's name to DBOS")
    run.add_argument("--schema", default=SCHEMA, help=f"DBOS's tables' schema ({SCHEMA})")
    serve = sub.add_parser("serve", help="run the enqueued runs (and recover this executor's)")
    serve.add_argument("--executor-id", default="local", help="this process's name to DBOS")
    serve.add_argument("--schema", default=SCHEMA, help=f"DBOS's tables' schema ({SCHEMA})")
    setup = sub.add_parser("setup", help="make DBOS's tables, then exit")
    setup.add_argument("--schema", default=SCHEMA, help=f"DBOS's tables' schema ({SCHEMA})")
    return parser.parse_args(argv)


def dbos_config(url: str, executor_id: str, schema: str = SCHEMA) -> DBOSConfig:
    return DBOSConfig(
        name=APP,
        system_database_url=url,
        dbos_system_schema=schema,
        executor_id=executor_id,
        log_level="WARNING",
    )


READY_LINE = "dbos agent ready"
WATCH_EVERY_S = 2.0
# A run of this executor that is pending with no step recorded for this long is stuck: DBOS does
# not drive a workflow on again, in the process that runs it, after its execution failed on a
# database outage (it could record neither the step nor the failure); only a restart recovers it.
STUCK_AFTER_S = "DBOS_STUCK_AFTER_S"
_STUCK = """
select count(*) from {schema}.workflow_status w
 where w.executor_id = %(executor)s and w.status = 'PENDING'
   and coalesce((select max(o.completed_at_epoch_ms) from {schema}.operation_outputs o
                  where o.workflow_uuid = w.workflow_uuid), w.started_at_epoch_ms, 0)
       < (extract(epoch from now()) * 1000)::bigint - %(after_ms)s
"""


async def stuck_runs(pool: AsyncConnectionPool, schema: str, executor: str, after_s: float) -> int:
    """This executor's pending runs with no step recorded for `after_s` (0 while the database
    cannot be asked)."""
    query = sql.SQL(_STUCK).format(schema=sql.Identifier(schema))
    with contextlib.suppress(psycopg.Error, PoolTimeout, OSError):
        async with pool.connection(timeout=WATCH_EVERY_S) as conn:
            params = {"executor": executor, "after_ms": int(after_s * 1000)}
            row = await (await conn.execute(query, params)).fetchone()
            return int(row[0]) if row else 0
    return 0


async def watch(pool: AsyncConnectionPool, args: argparse.Namespace, after_s: float) -> str:
    """Until a run of this executor is stuck: why this process must restart."""
    while True:
        await asyncio.sleep(WATCH_EVERY_S)
        if stuck := await stuck_runs(pool, args.schema, args.executor_id, after_s):
            return (
                f"{stuck} run(s) of executor {args.executor_id} stuck for {after_s:g} s (a "
                "database outage failed them mid-step): exiting, for the supervisor to restart "
                "this process, which recovers them"
            )


async def serve(args: argparse.Namespace) -> int:
    """Launch DBOS (recovering this executor's pending runs) and take runs from the queue
    until SIGTERM or SIGINT, or until one of its runs is stuck (exit 1: restart it)."""
    model = model_from_env()
    url = ensure_database_url()
    after_s = env_number(STUCK_AFTER_S, DEFAULT_STUCK_AFTER_S, positive=True)
    code = 0
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with configured_grocer() as grocer:
        pool = await open_pool(url, max_size=QUEUE_CONCURRENCY + 1)
        try:
            use(Dependencies(pool, model, grocer))
            DBOS(config=dbos_config(url, args.executor_id, args.schema))
            DBOS.launch()
            try:
                await DBOS.register_queue_async(QUEUE_NAME, worker_concurrency=QUEUE_CONCURRENCY)
                print(f"{READY_LINE}: executor {args.executor_id}", flush=True)
                stopped = asyncio.ensure_future(stop.wait())
                watching = asyncio.ensure_future(watch(pool, args, after_s))
                await asyncio.wait({stopped, watching}, return_when=asyncio.FIRST_COMPLETED)
                stopped.cancel()
                watching.cancel()
                if watching.done() and not watching.cancelled():
                    log.error("%s", watching.result())
                    code = 1
            finally:
                DBOS.destroy()
        finally:
            await pool.close()
    return code


async def main(args: argparse.Namespace) -> int:
    if args.command == "serve":
        return await serve(args)
    url = ensure_database_url()
    if args.command == "setup":
        async with await connect_postgres(url) as conn:
            await ensure_schema(conn)
        DBOS(config=dbos_config(url, "setup", args.schema))
        DBOS.launch()  # makes DBOS's tables
        DBOS.destroy()
        return 0
    design = KeyDesign.parse(args.design)  # every setting checked before anything is touched
    model = model_from_env()
    async with configured_grocer() as grocer:
        async with await connect_postgres(url) as conn:
            await ensure_schema(conn)
        pool = await open_pool(url, max_size=2)
        try:
            use(Dependencies(pool, model, grocer))
            DBOS(config=dbos_config(url, args.executor_id, args.schema))
            DBOS.launch()  # recovers what this executor left pending
            try:
                request = DBOSRequest(household=args.household, design=design)
                with SetWorkflowID(args.run_id):
                    handle = await DBOS.start_workflow_async(grocery_agent, request)
                summary = await handle.get_result()
            finally:
                DBOS.destroy()
            print(f"run {args.run_id} ({design}) completed: {summary.text}")
            async with pool.connection() as conn:
                state = await read_run_state(conn, args.run_id, grocer)
        finally:
            await pool.close()
    print(f"run {args.run_id}: {state.counts_text()}")
    return 0


if __name__ == "__main__":
    run_main(main(parse_args()))
