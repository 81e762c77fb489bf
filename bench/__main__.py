"""`python -m bench [--json PATH] [--quick]`: what a checkpoint, a step and a recovery cost."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pydantic import BaseModel

from bench.postgres import measure_postgres
from store.cli import run_main
from store.db import connect, database_url, ensure_schema


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    parser.add_argument("--quick", action="store_true", help="few samples: a smoke run")
    parser.add_argument("-n", type=int, default=None, help="samples per Postgres figure")
    return parser.parse_args()


def print_table(figures: dict[str, BaseModel]) -> None:
    width = max(len(name) for name in figures)
    print(f"{'figure':<{width}}  {'median ms':>10}  {'p99 ms':>9}  {'n':>6}")
    for name, fig in figures.items():
        d = fig.model_dump()
        if "median_ms" in d:
            print(f"{name:<{width}}  {d['median_ms']:>10.4f}  {d['p99_ms']:>9.4f}  {d['n']:>6}")
        else:
            print(f"{name:<{width}}  {d['per_s']:>10.1f} /s")


async def main(args: argparse.Namespace) -> int:
    n = args.n or (100 if args.quick else 2000)
    figures: dict[str, BaseModel] = {}
    async with await connect(database_url()) as conn:
        await ensure_schema(conn)
        figures.update(await measure_postgres(conn, n))
    print_table(figures)
    if args.json:
        args.json.write_text(json.dumps({k: v.model_dump() for k, v in figures.items()}, indent=2))
    return 0


if __name__ == "__main__":
    run_main(main(parse_args()))
