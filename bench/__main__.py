"""`python -m bench [--json PATH] [--quick]`: what a checkpoint, a step and a recovery cost.

`python -m bench --crashtest`: how long a whole crash test takes, grouped (the default) and
`--exact`, and how it grows with the number of boundaries (points, groups, runs, wall time,
seconds per point, the Temporal server's CPU); what the points inside activities (after each
effect) cost, against the same test without them; a deploy crash test against both, and its
replay pass in milliseconds per boundary; the same worker run as a command, killed on the wire
through crashtest's proxy, against in process.

Every figure is measured in this one run, on the same Postgres and Temporal server, so the ratios
between them hold even on a shared, noisy machine where absolute times drift.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path

from pydantic import BaseModel
from temporal_crashtest import Processes

from bench.dbos import dbos_figures_in_child, measure_dbos_recovery
from bench.postgres import measure_postgres
from bench.recovery import measure_recovery
from bench.sdk_metrics import mean_latencies_ms, runtime_with_metrics
from bench.stats import Figure
from bench.temporal import measure_temporal
from bench.throughput import journal_throughput_in_child, temporal_throughput
from infra.cli import ArgumentParser, run_main
from infra.config import PROJECT_ROOT, data_dir
from infra.db import connect_postgres, ensure_database_url, ensure_schema, open_pool
from infra.metrics import EFFECTS_LOGGER
from infra.reporting import say
from infra.temporal_client import connect_temporal
from infra.temporal_server import ensure_temporal_address
from journal.crash_points import without_crash_at


def parse_args() -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    parser.add_argument("--quick", action="store_true", help="few samples: a smoke run")
    parser.add_argument("-n", type=int, default=None, help="samples per Postgres figure (2000)")
    parser.add_argument("--temporal-n", type=int, default=None, help="per Temporal figure (100)")
    parser.add_argument("--recoveries", type=int, default=None, help="killed workers (5)")
    parser.add_argument("--runs", type=int, default=None, help="runs for throughput (200)")
    parser.add_argument("--postgres-only", action="store_true", help="skip the Temporal figures")
    crash = parser.add_argument_group("crash test speed (python -m bench --crashtest)")
    crash.add_argument("--crashtest", action="store_true", help="measure crash tests instead")
    crash.add_argument(
        "--crashtest-runs", type=int, default=None, help="whole crash tests per target and mode (3)"
    )
    crash.add_argument(
        "--sizes", default="5,20,50,100,200", help="boundaries of the growing workflow"
    )
    crash.add_argument(
        "--exact-up-to",
        type=int,
        default=50,
        help="measure --exact too up to this size (its work grows as N squared)",
    )
    crash.add_argument(
        "--deploy-up-to",
        type=int,
        default=50,
        help="measure a deploy crash test (to the same code) up to this size; above it, only "
        "its replay pass (and one cell)",
    )
    scale = parser.add_argument_group("scale: how cost grows (python -m bench --scale)")
    scale.add_argument("--scale", action="store_true", help="measure growth instead (minutes)")
    scale.add_argument("--history", default="0,5000,20000", help="completed runs (0,5000,20000)")
    scale.add_argument("--in-flight", default="1,50,500", help="runs at once (1,50,500)")
    scale.add_argument("--journal-rows", default="10000,1000000", help="(10000,1000000)")
    args = parser.parse_args()
    for name in ("history", "in_flight", "journal_rows", "sizes"):
        try:
            numbers = [int(x) for x in getattr(args, name).split(",") if x.strip()]
        except ValueError:
            parser.error(f"--{name.replace('_', '-')}: comma-separated whole numbers")
        if not numbers or min(numbers) < 0 or numbers != sorted(numbers):
            parser.error(f"--{name.replace('_', '-')}: ascending numbers, none negative")
        setattr(args, name, numbers)
    for name in ("n", "temporal_n", "recoveries", "runs", "crashtest_runs"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def progress(text: str) -> None:
    say(f"... {text}")


def print_table(figures: dict[str, BaseModel]) -> None:
    width = max(len(name) for name in figures)
    print(f"{'figure':<{width}}  {'median ms':>10}  {'p99 ms':>9}  {'n':>5}")
    for name, fig in figures.items():
        d = fig.model_dump()
        if "median_ms" in d:
            print(f"{name:<{width}}  {d['median_ms']:>10.4f}  {d['p99_ms']:>9.4f}  {d['n']:>5}")
        else:
            rss = f", peak RSS {d['rss_mb']} MiB" if d.get("rss_mb") else ""
            print(f"{name:<{width}}  {d['per_s']:>10.1f} runs/s ({d['runs']} runs{rss})")


def ratio(figures: dict[str, BaseModel], a: str, b: str) -> str:
    fa, fb = figures[a], figures[b]
    assert isinstance(fa, Figure) and isinstance(fb, Figure)
    return f"{fa.median_ms / fb.median_ms:.2f}x"


async def scale(args: argparse.Namespace) -> int:
    logging.getLogger("journal").setLevel(logging.WARNING)  # a line per run opened is noise here
    from bench.scale import ScaleReport, flat_figures, journal_scale, table, temporal_scale

    n = args.temporal_n or (5 if args.quick else 30)
    recoveries = args.recoveries or (1 if args.quick else 3)
    history, flights = await temporal_scale(args.history, args.in_flight, n, recoveries, progress)
    journal = await journal_scale(
        args.journal_rows, args.n or (200 if args.quick else 2000), progress
    )
    report = ScaleReport(history=history, in_flight=flights, journal=journal)
    print(table(report))
    if args.json:
        out = {name: fig.model_dump() for name, fig in flat_figures(report).items()}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


async def crashtests(args: argparse.Namespace) -> int:
    from bench.crashtest_speed import (
        AWAKE,
        EFFECTS_WEIGHED_UP_TO,
        GROCERY,
        SLEEPS,
        CrashtestError,
        Timing,
        measure,
        private_dev_server,
        ratios,
        reminder,
        sequence,
        table,
    )

    runs = args.crashtest_runs or (1 if args.quick else 3)
    out = data_dir() / "bench" / f"crashtest-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    timings: list[Timing] = []
    with private_dev_server(out / "temporal-dev-server.log") as server:
        env = dict(
            without_crash_at(os.environ),
            DATABASE_URL=ensure_database_url(),
            TEMPORAL_ADDRESS=server.address,
        )
        tests: list[tuple[str, list[str], int, tuple[str, ...]]] = [
            ("grocery agent", GROCERY, runs, ("grouped", "exact", "boundaries")),
            (
                "unkeyed sequence of 20",
                sequence(20, "unkeyed_worker"),
                runs,
                ("grouped", "exact", "boundaries", "command"),
            ),
            (AWAKE, reminder(0), runs, ("grouped",)),
            (SLEEPS, reminder(30), runs, ("grouped",)),
        ]
        for size in args.sizes:
            chosen = ["grouped"] + ["exact"] * (size <= args.exact_up_to)
            chosen += ["deploy" if size <= args.deploy_up_to else "replay"]
            weighed = size <= EFFECTS_WEIGHED_UP_TO  # a ratio of medians: `runs` samples each
            chosen += ["boundaries"] * weighed
            tests.append(
                (f"sequence of {size}", sequence(size), runs if weighed else 1, tuple(chosen))
            )
        try:
            for target, command, n, modes in tests:
                timings += await measure(target, command, env, n, out, server, progress, modes)
        except CrashtestError as err:
            print(table(timings))
            say(f"error: {err}")
            return 1
    print(table(timings))
    print()
    print("\n".join(ratios(timings)))
    if args.json:
        args.json.write_text(json.dumps([t.model_dump() for t in timings], indent=2) + "\n")
    return 0


async def temporal_figures(
    temporal_n: int, recoveries: int, runs: int, log_dir: Path
) -> tuple[dict[str, BaseModel], dict[str, float], dict[str, float]]:
    """Temporal's figures (a step, the agent, recovery, throughput) and DBOS's recovery, with
    where a Temporal step's time goes (the server's event times) and as the SDK saw it."""
    figures: dict[str, BaseModel] = {}
    runtime, metrics_url = runtime_with_metrics()
    client = await connect_temporal(runtime=runtime)
    pool = await open_pool(ensure_database_url())
    try:
        progress(f"Temporal: step overhead and the grocery agent (n={temporal_n})")
        temporal, legs = await measure_temporal(client, pool, temporal_n)
        figures.update(temporal)
        sdk_view = mean_latencies_ms(metrics_url)
    finally:
        await pool.close()
    env = dict(
        without_crash_at(os.environ),
        DATABASE_URL=ensure_database_url(),
        TEMPORAL_ADDRESS=ensure_temporal_address(),
    )
    procs = Processes(log_dir, env, cwd=PROJECT_ROOT)
    try:
        progress(f"recovery: {recoveries} workers SIGKILLed in the order activity")
        figures["recovery: new worker start -> run completed"] = await measure_recovery(
            client, procs, recoveries
        )
        progress(f"DBOS recovery: {recoveries} processes SIGKILLed in the order step")
        figures["recovery: dbos process start -> run completed"] = await measure_dbos_recovery(
            procs, recoveries
        )
        progress(f"Temporal throughput: {runs} runs at once on one worker")
        figures["throughput: temporal"] = await temporal_throughput(client, procs, runs)
    finally:
        procs.kill_all()
    return figures, legs, sdk_view


def print_summary(
    figures: dict[str, BaseModel], legs: dict[str, float], sdk_view: dict[str, float]
) -> None:
    """The figures' table, each save against the floor, and where a Temporal step's time goes."""
    print_table(figures)
    floor = "bare INSERT commit (floor)"
    print(f"\ncheckpoint save / floor: {ratio(figures, 'journal checkpoint save', floor)}")
    print(f"seed method / floor:     {ratio(figures, 'seed method save (SELECT + INSERT)', floor)}")
    print(f"dbos step / floor:       {ratio(figures, 'dbos step (output recorded)', floor)}")
    print(f"temporal step / floor:   {ratio(figures, 'temporal step (activity)', floor)}")
    if legs:
        print("\nwhere a Temporal step's time goes (median ms, from the server's event times):")
        for leg, ms in legs.items():
            print(f"  {leg:<62} {ms:8.3f}")
        print("as the SDK saw it (mean ms per task or call, all bench workflows; its metrics):")
        for leg, ms in sdk_view.items():
            print(f"  {leg:<62} {ms:8.2f}")


async def main(args: argparse.Namespace) -> int:
    # A line per effect of thousands of benchmark runs would bury the progress lines.
    logging.getLogger(EFFECTS_LOGGER).setLevel(logging.WARNING)
    if args.scale:
        return await scale(args)
    if args.crashtest:
        return await crashtests(args)
    quick = args.quick
    n = args.n or (200 if quick else 2000)
    temporal_n = args.temporal_n or (5 if quick else 100)
    recoveries = args.recoveries or (1 if quick else 5)
    runs = args.runs or (10 if quick else 200)
    log_dir = data_dir() / "bench" / time.strftime("%Y%m%d-%H%M%S")

    figures: dict[str, BaseModel] = {}
    legs: dict[str, float] = {}
    sdk_view: dict[str, float] = {}
    progress(f"Postgres: floor, checkpoint save, seed method, replay (n={n})")
    async with await connect_postgres(ensure_database_url()) as conn:
        await ensure_schema(conn)
        figures.update(await measure_postgres(conn, n))
    progress(f"journal throughput: {runs} durable runs, 10 at a time")
    figures["throughput: journal durable"] = await journal_throughput_in_child(runs, 10)
    progress(f"DBOS: step, grocery run (n={temporal_n}), throughput ({runs} runs, 10 at a time)")
    figures.update(await dbos_figures_in_child(n, temporal_n, runs, 10))
    if not args.postgres_only:
        temporal, legs, sdk_view = await temporal_figures(temporal_n, recoveries, runs, log_dir)
        figures.update(temporal)
    print_summary(figures, legs, sdk_view)
    if args.json:
        out = {name: fig.model_dump(exclude_none=True) for name, fig in figures.items()}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    run_main(main(parse_args()))
