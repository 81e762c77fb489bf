"""`python -m infra stop`: stop the local services this project started (`make stop`).
`python -m infra blocked`: the runs a deploy blocked (their code no longer replays), with why
and what to do; exit 1 if there is any.
`python -m infra temporal-address`: the Temporal address every command uses (TEMPORAL_ADDRESS,
else the local dev server, started if it is not running), on stdout; quick, for the Makefile."""

from __future__ import annotations

import argparse
import sys

from infra.cli import ArgumentParser


async def stop() -> int:
    from infra.config import data_dir
    from infra.embedded_postgres import stop_postgres
    from infra.grocer_server import stop_grocer
    from infra.temporal_server import is_listening, stop_dev_server

    if stop_dev_server():
        print("Temporal dev server: stopped")
    elif is_listening():
        print("Temporal dev server: the one on :7233 was not started by this project; left alone")
    else:
        print("Temporal dev server: not running")
    print("grocer: stopped" if stop_grocer() else "grocer: not running")
    if stop_postgres():  # returns once the postmaster and its backends have exited
        print("embedded Postgres: stopped")
    elif (data_dir() / "pg" / "PG_VERSION").exists():
        print("embedded Postgres: not running")
    else:
        print("embedded Postgres: none under .data/pg")
    return 0


async def blocked(limit: int) -> int:
    from infra.blocked import WHAT_TO_DO, blocked_runs
    from infra.cli import visible
    from infra.temporal_client import connect_temporal

    def progress(checked: int) -> None:
        print(f"checked {checked} running run(s) so far", file=sys.stderr, flush=True)

    client = await connect_temporal()
    found = 0
    async for run in blocked_runs(client, limit=limit, progress=progress):
        found += 1
        print(f"{visible(run.workflow_id)} (run {visible(run.run_id)}): {visible(run.why)}")
    if found:
        print(f"{found} blocked run(s): {WHAT_TO_DO}")
    else:
        print(f"no blocked run (among at most {limit} running runs: --limit N to look at more)")
    return 1 if found else 0


def _limit(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 10_000_000:
        raise argparse.ArgumentTypeError(f"a whole number from 1 to 10000000, not {text!r}")
    return int(text)


def temporal_address() -> int:
    """Without the SDK's imports (half a second): an error is one line, exit 2."""
    from infra.errors import AgentError
    from infra.temporal_server import ensure_temporal_address as address

    try:
        print(address())
    except AgentError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    parser = ArgumentParser(prog="python -m infra", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["stop", "temporal-address", "blocked"])
    parser.add_argument(
        "--limit", type=_limit, default=10_000, help="blocked: look at most at N running runs"
    )
    args = parser.parse_args()
    command = args.command
    if command == "temporal-address":
        sys.exit(temporal_address())
    from infra.cli import run_main

    run_main(blocked(args.limit) if command == "blocked" else stop())
