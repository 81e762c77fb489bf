"""`python -m dbos_agent run --run-id R [--design keyed|none]`: run one grocery agent run on DBOS;
`python -m dbos_agent serve`: run the runs enqueued on DBOS's `grocery` queue until SIGTERM;
`python -m dbos_agent pending`: the runs left pending by another version than the latest one
deployed, which no process of the latest recovers, with what to do (exit 1 if any).

The process launches DBOS on the application's own Postgres (`DATABASE_URL`; DBOS's tables in
the schema `dbos`), which first recovers the workflows this executor left pending — what a DBOS
application does when it starts after a crash — then starts the run under its workflow id (a
business id: starting it again returns the same workflow, it does not run it twice), waits for
its end and prints what it left. `--executor-id` names the process to DBOS: a process recovers
the workflows its executor id left pending. A process holds its id while it runs
(`dbos_agent.executors`): a second live process with the same id is refused, and without one a
process takes the first free `{hostname}-N`. Every process on one `--schema` shares DBOS's queue
of recovered work (one application). A run that ends in error is one line (DBOS's traceback
stays out of the output).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import re
import signal
from urllib.parse import quote, urlencode

import psycopg
from dbos import DBOS, DBOSConfig, SetWorkflowID
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolTimeout

from agent.data import HOUSEHOLD_PATTERN, Summary
from agent.grocer import configured_grocer
from agent.llm import model_from_env
from agent.outcome import read_run_state
from agent.releases import Release
from dbos_agent.agent import (
    QUEUE_CONCURRENCY,
    QUEUE_NAME,
    DBOSRequest,
    Dependencies,
    KeyDesign,
    grocery_agent,
    use,
)
from dbos_agent.executors import HeldExecutor, hold_executor
from dbos_agent.outages import count_missing_socket_as_outage, through_outage
from infra.cli import ArgumentParser, run_main, visible
from infra.config import env_number
from infra.db import connect_postgres, ensure_database_url, ensure_schema, open_pool
from infra.errors import AgentError, first_line

APP = "grocery-agent"
SCHEMA = "dbos"  # DBOS's system tables, in the application's own database
DEFAULT_HOUSEHOLD = "household-1"
DEFAULT_STUCK_AFTER_S = 300.0  # longer than any step takes (a model call, an order)
MAX_STUCK_AFTER_S = 86_400.0
# A run id is a business id: printable, no spaces, as Temporal's workflow ids are here.
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,199}")
log = logging.getLogger(__name__)


class RunFailed(AgentError):
    """A run ended in error: its recorded failure, in a line."""


def _run_id(text: str) -> str:
    if not RUN_ID_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a run id (letters, digits and _ . : @ -, at most 200)"
        )
    return text


def _household(text: str) -> str:
    if not re.fullmatch(HOUSEHOLD_PATTERN, text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a household (letters, digits and _ . -, at most 63)"
        )
    return text


class _OneLine(logging.Filter):
    """DBOS logs a failed workflow with its whole traceback: keep one line, naming the error
    (`drop_run_failures`: drop those lines, where the command says the run's failure itself)."""

    WORKFLOW_FAILED = "Exception encountered in asynchronous workflow"

    def __init__(self, drop_run_failures: bool) -> None:
        super().__init__()
        self.drop_run_failures = drop_run_failures

    def filter(self, record: logging.LogRecord) -> bool:
        message = first_line(Exception(record.getMessage()))
        if self.drop_run_failures and message.startswith(self.WORKFLOW_FAILED):
            return False
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            message = f"{message.rstrip(':')}: {type(error).__name__}: {first_line(error)}"
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        record.msg, record.args = message, None
        return True


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m dbos_agent", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run (or recover) one agent run")
    executor = "this process's name to DBOS, held while it runs (default: the first free "
    executor += "HOSTNAME-N)"
    run.add_argument(
        "--run-id", required=True, type=_run_id, help="the workflow id (a business id)"
    )
    run.add_argument("--design", default="keyed", help=" | ".join(d.value for d in KeyDesign))
    run.add_argument("--household", default=DEFAULT_HOUSEHOLD, type=_household)
    run.add_argument("--executor-id", type=_run_id, help=executor)
    run.add_argument("--schema", default=SCHEMA, help=f"DBOS's tables' schema ({SCHEMA})")
    serve = sub.add_parser("serve", help="run the enqueued runs (and recover this executor's)")
    serve.add_argument("--executor-id", type=_run_id, help=executor)
    serve.add_argument("--schema", default=SCHEMA, help=f"DBOS's tables' schema ({SCHEMA})")
    for command in (run, serve):
        command.add_argument(
            "--release",
            default=Release.TODAY.value,
            help=f"the agent's code: {' | '.join(Release)} (the deploy matrix's)",
        )
    pending = sub.add_parser("pending", help="list the runs another version left pending")
    pending.add_argument("--schema", default=SCHEMA, help=f"DBOS's tables' schema ({SCHEMA})")
    setup = sub.add_parser("setup", help="make DBOS's tables, then exit")
    setup.add_argument("--schema", default=SCHEMA, help=f"DBOS's tables' schema ({SCHEMA})")
    return parser.parse_args(argv)


def database_url(dsn: str) -> str:
    """DATABASE_URL as DBOS takes it: a `postgresql://` URL (libpq's `key=value` form too)."""
    params = conninfo_to_dict(dsn)
    user = quote(str(params.pop("user", "") or ""), safe="")
    password = params.pop("password", None)
    auth = f"{user}:{quote(str(password), safe='')}@" if password else f"{user}@" if user else ""
    host = str(params.pop("host", "") or "")
    port = params.pop("port", None)
    dbname = quote(str(params.pop("dbname", "") or ""), safe="")
    if host.startswith("/"):  # a Unix socket's folder: a query parameter
        params["host"] = host
        host = ""
    where = f"{host}:{port}" if host and port else host
    if port and not host:
        params["port"] = port
    query = f"?{urlencode(params)}" if params else ""
    return f"postgresql://{auth}{where}/{dbname}{query}"


def dbos_config(url: str, executor_id: str, schema: str = SCHEMA) -> DBOSConfig:
    return DBOSConfig(
        name=APP,
        system_database_url=database_url(url),
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
select w.workflow_uuid from {schema}.workflow_status w
 where w.executor_id = %(executor)s and w.status = 'PENDING'
   and coalesce((select max(o.completed_at_epoch_ms) from {schema}.operation_outputs o
                  where o.workflow_uuid = w.workflow_uuid), w.started_at_epoch_ms, 0)
       < (extract(epoch from now()) * 1000)::bigint - %(after_ms)s
"""


async def stuck_runs(deps: Dependencies, schema: str, executor: str, after_s: float) -> list[str]:
    """This executor's pending runs with no step recorded for `after_s` and no step running in
    this process now (none while the database cannot be asked)."""
    query = sql.SQL(_STUCK).format(schema=sql.Identifier(schema))
    with contextlib.suppress(psycopg.Error, PoolTimeout, OSError):
        async with deps.pool.connection(timeout=WATCH_EVERY_S) as conn:
            params = {"executor": executor, "after_ms": int(after_s * 1000)}
            rows = await (await conn.execute(query, params)).fetchall()
            return [row[0] for row in rows if row[0] not in deps.running]
    return []


async def watch(deps: Dependencies, schema: str, executor: str, after_s: float) -> str:
    """Until a run of this executor is stuck on two looks in a row: why this process must
    restart. (One look can fall between a step's end and DBOS recording it: none running, the
    last record old.)"""
    suspects: set[str] = set()
    while True:
        await asyncio.sleep(WATCH_EVERY_S)
        found = set(await stuck_runs(deps, schema, executor, after_s))
        stuck, suspects = found & suspects, found
        if stuck:
            return (
                f"{len(stuck)} run(s) of executor {executor} stuck for {after_s:g} s with no "
                "step running (DBOS no longer drives them in this process): exiting, for the "
                "supervisor to restart this process, which recovers them"
            )


def stuck_after_s() -> float:
    """DBOS_STUCK_AFTER_S: how long a run may sit with no step recorded and none running."""
    return env_number(
        STUCK_AFTER_S, DEFAULT_STUCK_AFTER_S, positive=True, maximum=MAX_STUCK_AFTER_S
    )


def quiet_dbos_tracebacks(drop_run_failures: bool) -> None:
    one_line = _OneLine(drop_run_failures)
    for handler in logging.getLogger("dbos").handlers:
        handler.addFilter(one_line)


async def serve(args: argparse.Namespace) -> int:
    """Launch DBOS (recovering this executor's pending runs) and take runs from the queue
    until SIGTERM or SIGINT, or until one of its runs is stuck (exit 1: restart it)."""
    release = Release.parse(args.release)
    model = model_from_env()
    url = ensure_database_url()
    after_s = stuck_after_s()
    code = 0
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with configured_grocer() as grocer:
        pool = await open_pool(url, max_size=QUEUE_CONCURRENCY + 1)  # waits for Postgres
        held = None
        try:
            held = await hold_executor(url, args.schema, args.executor_id)
            deps = Dependencies(pool=pool, model=model, grocer=grocer, release=release)
            use(deps)
            launch(url, held, args.schema, one_run=False)
            try:
                await through_outage(
                    lambda: DBOS.register_queue_async(
                        QUEUE_NAME, worker_concurrency=QUEUE_CONCURRENCY
                    ),
                    f"cannot register the queue {QUEUE_NAME!r}",
                )
                print(f"{READY_LINE}: executor {held.executor_id}", flush=True)
                stopped = asyncio.ensure_future(stop.wait())
                watching = asyncio.ensure_future(
                    watch(deps, args.schema, held.executor_id, after_s)
                )
                keeping = asyncio.ensure_future(held.keep())
                tasks = {stopped, watching, keeping}
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in tasks:
                    task.cancel()
                if keeping.done() and not keeping.cancelled():
                    keeping.result()  # ExecutorTaken: one line, exit 2
                if watching.done() and not watching.cancelled():
                    log.error("%s", watching.result())
                    code = 1
            finally:
                DBOS.destroy()
        finally:
            if held is not None:
                await held.release()
            await pool.close()
    return code


def launch(url: str, held: HeldExecutor, schema: str, *, one_run: bool) -> None:
    """Launch DBOS as the executor this process holds: it recovers that executor's pending
    runs. DBOS's log lines stay one line each (`one_run`: a run's failure is the command's to
    say)."""
    count_missing_socket_as_outage()
    DBOS(config=dbos_config(url, held.executor_id, schema))
    quiet_dbos_tracebacks(drop_run_failures=one_run)
    DBOS.launch()


async def main(args: argparse.Namespace) -> int:
    if args.command == "serve":
        return await serve(args)
    url = ensure_database_url()
    if args.command == "pending":
        return await list_left_pending(url, args.schema)
    if args.command == "setup":
        async with await connect_postgres(url) as conn:
            await ensure_schema(conn)
        DBOS(config=dbos_config(url, "setup", args.schema))
        DBOS.launch()  # makes DBOS's tables
        DBOS.destroy()
        return 0
    design = KeyDesign.parse(args.design)  # every setting checked before anything is touched
    release = Release.parse(args.release)
    model = model_from_env()
    async with configured_grocer() as grocer:
        async with await connect_postgres(url) as conn:
            await ensure_schema(conn)
        pool = await open_pool(url, max_size=2)  # waits for Postgres
        held = None
        try:
            held = await hold_executor(url, args.schema, args.executor_id)
            use(Dependencies(pool=pool, model=model, grocer=grocer, release=release))
            launch(url, held, args.schema, one_run=True)  # recovers this executor's pending runs
            try:
                request = DBOSRequest(household=args.household, design=design)
                summary = await run_to_its_end(args.run_id, request)
            finally:
                DBOS.destroy()
            print(f"run {args.run_id} ({design}) completed: {visible(summary.text)}")
            async with pool.connection() as conn:
                state = await read_run_state(conn, args.run_id, grocer)
        finally:
            if held is not None:
                await held.release()
            await pool.close()
    print(f"run {args.run_id}: {state.counts_text()}")
    return 0


_LATEST_VERSION = """
select version_name from {schema}.application_versions order by version_timestamp desc limit 1
"""
# Runs pending (or enqueued) under another application version than the latest one a process
# registered: DBOS's recovery and queues take a workflow only on a process of its own version.
_LEFT_PENDING = """
select workflow_uuid, application_version, executor_id from {schema}.workflow_status
 where status in ('PENDING', 'ENQUEUED') and application_version is distinct from %(latest)s
 order by created_at
"""


async def list_left_pending(url: str, schema: str) -> int:
    """Print each run another version left pending, and what to do; 1 if there is any."""
    where = sql.Identifier(schema)
    async with await connect_postgres(url) as conn:
        found = await (await conn.execute(sql.SQL(_LATEST_VERSION).format(schema=where))).fetchone()
        latest = found[0] if found else None
        rows = await (
            await conn.execute(sql.SQL(_LEFT_PENDING).format(schema=where), {"latest": latest})
        ).fetchall()
    for run_id, version, executor in rows:
        print(
            f"{visible(run_id)}: pending on version {visible(str(version))} "
            f"(executor {visible(str(executor))})"
        )
    if not rows:
        print(f"no run left pending by another version (latest: {visible(str(latest))})")
        return 0
    print(
        f"{len(rows)} run(s) left pending by another version than the latest "
        f"({visible(str(latest))}): no "
        "process of the latest recovers them. Keep a process of their version running until "
        "they end (DBOS__APPVERSION=<their version> python -m dbos_agent serve), or roll back; "
        "forking them onto the new version gives them new workflow ids, and so new keys: their "
        "steps' effects would happen again"
    )
    return 1


async def run_to_its_end(run_id: str, request: DBOSRequest) -> Summary:
    """Start the run (or find it, already started under this business id) and wait for its
    end; a run that ends in error is `RunFailed`, with its recorded failure in a line."""
    with SetWorkflowID(run_id):
        handle = await DBOS.start_workflow_async(grocery_agent, request)
    try:
        return await handle.get_result()
    except AgentError as err:
        raise RunFailed(f"run {run_id} failed: {err}") from None
    except Exception as err:  # what DBOS recorded: a failure of another kind, or its own
        raise RunFailed(f"run {run_id} failed: {type(err).__name__}: {first_line(err)}") from None


if __name__ == "__main__":
    run_main(main(parse_args()))
