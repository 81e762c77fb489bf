"""`python -m journal run|resume|show`: run one journal agent run, resume every unfinished run,
or show what a run left.

`run --run-id R --design durable` runs (or resumes) one run; CRASH_AT=after-effect:4 (for
example) makes the process SIGKILL itself at that point; run the same command again without it to
resume. `resume` finds every unfinished run and runs it to its end, each with the design it was
started with: what an operator runs after a crash.
"""

from __future__ import annotations

import argparse

import psycopg
from psycopg_pool import PoolTimeout

from agent.grocer import configured_grocer
from agent.llm import model_from_env
from agent.outcome import read_run_state
from agent.releases import Release
from agent.steps import STEP_NAMES
from infra.cli import ArgumentParser, run_main
from infra.config import step_pause_seconds
from infra.db import connect_postgres, ensure_database_url, ensure_schema, open_pool
from infra.errors import DatabaseUnavailable, UnknownRun, first_line
from journal.agent import run_to_completion
from journal.crash_points import crash_point_from_env
from journal.engine import Design
from journal.resume import resume_unfinished

DEFAULT_HOUSEHOLD = "household-1"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m journal", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run or resume one agent run")
    run.add_argument("--run-id", required=True)
    run.add_argument("--design", default="durable", help=" | ".join(d.value for d in Design))
    run.add_argument("--household", default=DEFAULT_HOUSEHOLD)
    run.add_argument(
        "--release",
        default=Release.TODAY.value,
        help=f"the agent's code to run it with: {' | '.join(Release)} (the deploy matrix's)",
    )
    resume = sub.add_parser("resume", help="resume every unfinished run")
    resume.add_argument("--concurrency", type=int, default=10, help="runs at once (10)")
    resume.add_argument(
        "--until-done",
        action="store_true",
        help="keep going until no run is unfinished, waiting for runs other processes hold",
    )
    show = sub.add_parser("show", help="print what a run left in the database")
    show.add_argument("--run-id", required=True)
    args = parser.parse_args(argv)
    if args.command == "resume" and args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    return args


async def resume(args: argparse.Namespace) -> int:
    model = model_from_env()
    pause = step_pause_seconds()
    async with configured_grocer() as grocer:
        pool = await open_pool(ensure_database_url(), max_size=args.concurrency + 1)
        try:
            async with pool.connection() as conn:
                await ensure_schema(conn)
            done = await resume_unfinished(
                pool,
                model,
                concurrency=args.concurrency,
                until_done=args.until_done,
                pause=pause,
                grocer=grocer,
            )
        except (psycopg.OperationalError, PoolTimeout) as err:
            raise DatabaseUnavailable(
                f"lost Postgres while resuming ({first_line(err)}); run `python -m journal "
                "resume` again"
            ) from None
        finally:
            await pool.close()
    parts = [f"resumed {len(done.completed)} runs to completion"]
    if done.busy:
        parts.append(f"{len(done.busy)} being run by other processes")
    if done.failed:
        parts.append(f"{len(done.failed)} failed")
    print("; ".join(parts))
    for run_id, why in done.failed.items():
        print(f"  {run_id}: {why}")
    return 1 if done.failed else 0


async def main(args: argparse.Namespace) -> int:
    if args.command == "resume":
        return await resume(args)
    if args.command == "run":  # every setting checked before anything is touched
        design = Design.parse(args.design)
        release = Release.parse(args.release)
        crash_at = crash_point_from_env(STEP_NAMES)
        model = model_from_env()
        pause = step_pause_seconds()
    async with configured_grocer() as grocer, await connect_postgres(ensure_database_url()) as conn:
        await ensure_schema(conn)
        if args.command == "run":
            summary = await run_to_completion(
                conn, model, args.run_id, design, args.household, crash_at, pause, grocer, release
            )
            print(f"run {args.run_id} ({design}) completed: {summary.text}")
        state = await read_run_state(conn, args.run_id, grocer)
    if not state.exists():
        raise UnknownRun(f"no run with id {args.run_id!r}")
    print(f"run {args.run_id}: {state.counts_text()}")
    if args.command == "show" and state.summary:
        print(f"summary: {state.summary}")
    return 0


if __name__ == "__main__":
    run_main(main(parse_args()))
