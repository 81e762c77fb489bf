"""`python -m dbos_agent run --run-id R [--design keyed|none]`: run one grocery agent run on DBOS.

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

from dbos import DBOS, DBOSConfig, SetWorkflowID

from agent.grocer import configured_grocer
from agent.llm import model_from_env
from agent.outcome import read_run_state
from dbos_agent.agent import DBOSRequest, Dependencies, KeyDesign, grocery_agent, use
from infra.cli import run_main
from infra.db import connect_postgres, ensure_database_url, ensure_schema, open_pool

APP = "grocery-agent"
SCHEMA = "dbos"  # DBOS's system tables, in the application's own database
DEFAULT_HOUSEHOLD = "household-1"


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
    return parser.parse_args(argv)


def dbos_config(url: str, executor_id: str, schema: str = SCHEMA) -> DBOSConfig:
    return DBOSConfig(
        name=APP,
        system_database_url=url,
        dbos_system_schema=schema,
        executor_id=executor_id,
        log_level="WARNING",
    )


async def main(args: argparse.Namespace) -> int:
    design = KeyDesign.parse(args.design)  # every setting checked before anything is touched
    model = model_from_env()
    url = ensure_database_url()
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
