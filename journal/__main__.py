"""`python -m journal run --run-id R --design durable`: run (or resume) the journal agent.

Exit 0 on completion with a short printed outcome. CRASH_AT=after-effect:4 (for example) makes the
process SIGKILL itself at that point; run the same command again without it to resume.
"""

from __future__ import annotations

import argparse

from agent.llm import StubModel
from agent.outcome import read_run_state
from agent.steps import STEP_NAMES
from infra.cli import run_main
from infra.config import crash_point_from_env, model_latency_seconds
from infra.db import connect, database_url, ensure_schema
from infra.errors import UnknownRun
from journal.agent import run_to_completion
from journal.engine import Design

DEFAULT_HOUSEHOLD = "household-1"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m journal", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run or resume one agent run")
    run.add_argument("--run-id", required=True)
    run.add_argument("--design", default="durable", help=" | ".join(d.value for d in Design))
    run.add_argument("--household", default=DEFAULT_HOUSEHOLD)
    show = sub.add_parser("show", help="print what a run left in the database")
    show.add_argument("--run-id", required=True)
    return parser.parse_args(argv)


async def main(args: argparse.Namespace) -> int:
    if args.command == "run":
        design = Design.parse(args.design)  # validate everything before touching the database
        crash_at = crash_point_from_env(STEP_NAMES, checkpoint_after_last=True)
        model = StubModel(model_latency_seconds())
    async with await connect(database_url()) as conn:
        await ensure_schema(conn)
        if args.command == "run":
            summary = await run_to_completion(
                conn, model, args.run_id, design, args.household, crash_at
            )
            print(f"run {args.run_id} ({design}) completed: {summary.text}")
        state = await read_run_state(conn, args.run_id)
        if not state.exists():
            raise UnknownRun(f"no run with id {args.run_id!r}")
        print(f"run {args.run_id}: {state.counts_text()}")
        if args.command == "show" and state.summary:
            print(f"summary: {state.summary}")
    return 0


if __name__ == "__main__":
    run_main(main(parse_args()))
