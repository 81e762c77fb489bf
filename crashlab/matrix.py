"""Run every cell of the crash matrix, several at once, with progress on stderr."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from temporal_crashtest import Processes

from crashlab.cells import MatrixCell, MatrixResult
from crashlab.engines import engine_named
from crashlab.lab import Lab
from crashlab.report import MatrixReport
from infra.config import PROJECT_ROOT, data_dir
from infra.db import connect_postgres, ensure_database_url, ensure_schema, open_pool
from infra.errors import AgentError
from infra.temporal_client import connect_temporal
from infra.temporal_server import ensure_temporal_address
from journal.crash_points import without_crash_at


def matrix_jobs() -> int:
    """Cells at once: fewer than crashtest's own default (8 a core), because a journal cell
    starts whole processes rather than forking them."""
    return max(4, 4 * (os.cpu_count() or 1))


def print_progress(done: int, total: int, result: MatrixResult) -> None:
    mark = "✓" if result.matches_no_crash else "✗"
    note = (
        "" if result.as_expected else f"  UNEXPECTED{': ' + result.error if result.error else ''}"
    )
    print(
        f"[{done:>3}/{total}] {result.engine}/{result.design:<13} {result.crash_at:<18} "
        f"{mark} {result.counts}  {result.seconds:5.1f} s{note}",
        file=sys.stderr,
        flush=True,
    )


async def run_matrix(
    cells: list[MatrixCell],
    *,
    jobs: int | None = None,
    progress: Callable[[int, int, MatrixResult], None] = print_progress,
    log_dir: Path | None = None,
) -> MatrixReport:
    """Every cell, `jobs` journal cells at once beside one crash test per Temporal design (each
    `jobs // 2` crash points at once); the journal's no-crash reference first."""
    started = time.monotonic()
    db_url = ensure_database_url()
    async with await connect_postgres(db_url) as conn:
        await ensure_schema(conn)
    env = dict(without_crash_at(os.environ), DATABASE_URL=db_url)
    processes = [c for c in cells if engine_named(c.engine).process_run is not None]
    temporal = [c for c in cells if c not in processes]  # a crash test per design
    log_dir = log_dir or data_dir() / "crashlab" / time.strftime("%Y%m%d-%H%M%S")
    procs = Processes(log_dir, env, cwd=PROJECT_ROOT)
    jobs = jobs or matrix_jobs()
    pool = await open_pool(db_url, max_size=4)
    results: list[MatrixResult] = []

    def done(result: MatrixResult) -> None:
        results.append(result)
        progress(len(results), len(cells), result)

    try:
        lab = Lab(procs=procs, pool=pool, log_dir=log_dir, db_url=db_url, jobs=max(2, jobs // 2))
        if temporal:
            lab.address = ensure_temporal_address()
            lab.client = await connect_temporal(lab.address)
        for engine in sorted({c.engine for c in processes}):
            try:
                await lab.reference(engine)
            except Exception as err:
                raise AgentError(
                    f"the {engine}'s no-crash reference run failed ({type(err).__name__}: "
                    f"{err}); its logs are in {procs.log_dir}"
                ) from None
        limit = asyncio.Semaphore(jobs)

        async def one(cell: MatrixCell) -> MatrixResult:
            async with limit:
                result = await lab.run_process_cell(cell)
            done(result)
            return result

        temporal_runs = [lab.run_temporal(temporal, done)] if temporal else []
        await asyncio.gather(*(one(c) for c in processes), *temporal_runs)
    finally:
        procs.kill_all()
        await pool.close()
    order = {(c.engine, c.design, c.crash_at): i for i, c in enumerate(cells)}
    ordered = sorted(results, key=lambda r: order[r.engine, r.design, r.crash_at])
    return MatrixReport(cells=ordered, seconds=round(time.monotonic() - started, 1))
