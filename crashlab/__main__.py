"""`python -m crashlab matrix|demo`: crash every design at every point, or watch one crash."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crashlab.cells import all_cells, select_cells
from crashlab.matrix import default_jobs, run_matrix
from infra.cli import run_main


def split(text: str | None) -> list[str] | None:
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m crashlab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    matrix = sub.add_parser("matrix", help="every design at every crash point")
    matrix.add_argument("--engine", choices=["journal", "temporal", "all"], default="all")
    matrix.add_argument("--json", type=Path, help="write the cells as JSON here")
    matrix.add_argument("--markdown", type=Path, help="write the table as Markdown here")
    matrix.add_argument("--jobs", type=int, default=default_jobs(), help="cells run at once")
    matrix.add_argument("--designs", help="only these designs, comma-separated")
    matrix.add_argument("--crash-points", help="only these crash points, comma-separated")
    sub.add_parser("demo", help="the narrated demo: kill a worker after the order, watch it heal")
    args = parser.parse_args()
    if args.command == "matrix" and args.jobs < 1:
        parser.error("--jobs must be at least 1")
    return args


async def main(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from crashlab.demo import demo

        return await demo()
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
