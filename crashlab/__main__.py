"""`python -m crashlab matrix|deploys|demo|chaos`: crash every design at every point, crash runs
in flight across the agent's deploys, watch one crash, or run many at once through random kills
and server restarts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crashlab.cells import select_cells
from crashlab.engines import ALL, CHAOS_DEFAULT, ENGINES, all_cells, engine_named
from crashlab.matrix import matrix_jobs, run_matrix
from infra.cli import ArgumentParser, run_main


def split(text: str | None) -> list[str] | None:
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def parse_args() -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m crashlab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    matrix = sub.add_parser("matrix", help="every design at every crash point")
    deploys = sub.add_parser("deploys", help="runs in flight across the agent's deploys")
    for command in (matrix, deploys):
        command.add_argument("--engine", choices=[*ENGINES, ALL], default=ALL)
        command.add_argument("--json", type=Path, help="write the cells as JSON here")
        command.add_argument("--markdown", type=Path, help="write the table as Markdown here")
        command.add_argument("--jobs", type=int, default=matrix_jobs(), help="cells run at once")
        command.add_argument("--designs", help="only these designs, comma-separated")
    matrix.add_argument("--crash-points", help="only these crash points, comma-separated")
    deploys.add_argument("--changes", help="only these changes: patched, unversioned, rollback")
    deploys.add_argument("--moments", help="only these moments, comma-separated")
    sub.add_parser("demo", help="the narrated demo: kill a worker after the order, watch it heal")
    chaos = sub.add_parser("chaos", help="many runs through random kills and server restarts")
    chaos.add_argument("--engine", choices=list(ENGINES), default=CHAOS_DEFAULT)
    designs = "; ".join(
        f"{e.name}: {', '.join(e.designs)} (default {e.default_design})" for e in ENGINES.values()
    )
    chaos.add_argument("--design", help=f"the engine's design ({designs})")
    chaos.add_argument("--runs", type=int, default=200, help="runs started at once (200)")
    chaos.add_argument("--workers", type=int, default=3, help="worker processes (3)")
    chaos.add_argument("--kills", type=int, default=20, help="workers SIGKILLed (20)")
    chaos.add_argument("--postgres-restarts", type=int, default=2, help="(2)")
    chaos.add_argument("--temporal-restarts", type=int, default=1, help="(1; Temporal only)")
    chaos.add_argument("--seed", type=int, default=1, help="the faults' order, gaps and victims")
    chaos.add_argument("--deadline-s", type=float, default=600, help="(600)")
    chaos.add_argument("--json", type=Path, help="write the report as JSON here")
    args = parser.parse_args()
    if args.command in ("matrix", "deploys") and args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.command == "chaos":
        for name in ("runs", "workers"):
            if getattr(args, name) < 1:
                parser.error(f"--{name} must be at least 1")
        for name in ("kills", "postgres_restarts", "temporal_restarts"):
            if getattr(args, name) < 0:
                parser.error(f"--{name.replace('_', '-')} cannot be negative")
        if args.deadline_s <= 0:
            parser.error("--deadline-s must be positive")
    return args


async def chaos(args: argparse.Namespace) -> int:
    from crashlab.chaos import ChaosOptions, run_chaos

    engine = engine_named(args.engine)
    design = engine.parse_design(args.design or engine.default_design)
    report = await run_chaos(
        ChaosOptions(
            engine=args.engine,
            design=design,
            runs=args.runs,
            workers=args.workers,
            kills=args.kills,
            postgres_restarts=args.postgres_restarts,
            temporal_restarts=args.temporal_restarts,
            seed=args.seed,
            deadline_s=args.deadline_s,
        )
    )
    faults = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in report.faults.items())
    done = f"{report.completed}/{report.runs} runs completed in {report.seconds} s"
    print(
        f"{report.engine}/{report.design}: {done}; faults: {faults}; "
        f"{report.process_restarts} process restarts"
        + (f", {report.failed_starts} failed starts" if report.failed_starts else "")
    )
    if report.recovery_ms:
        r = report.recovery_ms
        print(
            f"recovery after a worker kill, until every run it held moved again "
            f"({report.kills_that_held_runs} kills held runs): median {r['median']:.0f} ms, "
            f"p99 {r['p99']:.0f} ms, max {r['max']:.0f} ms"
        )
    print(f"violations: {len(report.violations)}")
    for violation in report.violations[:20]:
        print(f"  {violation.run_id}: {violation.what}")
    if len(report.violations) > 20:
        print(f"  ... and {len(report.violations) - 20} more (all in --json)")
    if args.json:
        args.json.write_text(report.model_dump_json(indent=1) + "\n")
    return 0 if report.ok else 1


async def deploys(args: argparse.Namespace) -> int:
    from crashlab.deploys import all_deploy_cells, run_deploy_matrix, select_deploy_cells

    every = all_deploy_cells(None if args.engine == ALL else args.engine)
    cells = select_deploy_cells(
        every, split(args.designs), split(args.changes), split(args.moments)
    )
    print(f"deploy matrix: {len(cells)} cells, {args.jobs} at a time", file=sys.stderr)
    report = await run_deploy_matrix(cells, jobs=args.jobs)
    print(report.table())
    for line in report.details():
        print(f"  {line}")
    print(f"{len(report.cells)} cells in {report.seconds} s; {len(report.unexpected)} unexpected")
    if args.json:
        args.json.write_text(report.model_dump_json(indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(report.table(markdown=True) + "\n")
    for r in report.unexpected:
        c = r.cell
        print(
            f"UNEXPECTED {c.engine}/{c.design} {c.change} {c.moment}: {r.verdict}, expected "
            f"{c.expected} ({r.why or r.counts})"
        )
    return 1 if report.unexpected else 0


async def main(args: argparse.Namespace) -> int:
    if args.command == "deploys":
        return await deploys(args)
    if args.command == "demo":
        from crashlab.demo import demo

        return await demo()
    if args.command == "chaos":
        return await chaos(args)
    cells = select_cells(all_cells(args.engine), split(args.designs), split(args.crash_points))
    print(f"crash matrix: {len(cells)} cells, {args.jobs} at a time", file=sys.stderr)
    report = await run_matrix(cells, jobs=args.jobs)
    print(report.table())
    print(report.legend())
    print(f"{len(report.cells)} cells in {report.seconds} s; {len(report.unexpected)} unexpected")
    if args.json:
        report.write_json(args.json)
    if args.markdown:
        args.markdown.write_text(report.table(markdown=True) + "\n\n" + report.legend() + "\n")
    for cell in report.unexpected:
        print(
            f"UNEXPECTED {cell.engine}/{cell.design} {cell.crash_at}: {cell.error or cell.counts}"
        )
    return 1 if report.unexpected else 0


if __name__ == "__main__":
    run_main(main(parse_args()))
