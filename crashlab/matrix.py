"""Run every cell of the crash matrix, several at once, with progress on stderr."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from crashlab.cells import MatrixCell, MatrixResult
from crashlab.engines import engine_named
from crashlab.lab import opened_lab
from crashlab.report import MatrixReport
from infra.errors import AgentError


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
    processes = [c for c in cells if engine_named(c.engine).process_run is not None]
    temporal = [c for c in cells if c not in processes]  # a crash test per design
    jobs = jobs or matrix_jobs()
    results: list[MatrixResult] = []

    def done(result: MatrixResult) -> None:
        results.append(result)
        progress(len(results), len(cells), result)

    async with opened_lab("", jobs=jobs, on_temporal=bool(temporal), log_dir=log_dir) as lab:
        for engine in sorted({c.engine for c in processes}):
            try:
                await lab.reference(engine)
            except Exception as err:
                raise AgentError(
                    f"the {engine}'s no-crash reference run failed ({type(err).__name__}: "
                    f"{err}); its logs are in {lab.log_dir}"
                ) from None
        limit = asyncio.Semaphore(jobs)

        async def one(cell: MatrixCell) -> MatrixResult:
            async with limit:
                result = await lab.run_process_cell(cell)
            done(result)
            return result

        temporal_runs = [lab.run_temporal(temporal, done)] if temporal else []
        await asyncio.gather(*(one(c) for c in processes), *temporal_runs)
    order = {(c.engine, c.design, c.crash_at): i for i, c in enumerate(cells)}
    ordered = sorted(results, key=lambda r: order[r.engine, r.design, r.crash_at])
    return MatrixReport(cells=ordered, seconds=round(time.monotonic() - started, 1))
