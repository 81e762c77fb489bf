"""How long a whole crash test takes: fast-forwarded (the default) against `--real-timeouts`, on
the grocery agent and the payments example, and how the total grows with the number of
boundaries (a workflow of N charges, `examples/shapes/sequence.py`).

Each sample is one whole `python -m temporal_crashtest run` (a fresh process: start-up, the
reference run and every cell), timed from outside; fast and real samples alternate, so that a
noisy neighbour slows both alike.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from crashlab.lab import grocery_crashtest_args
from infra.config import PROJECT_ROOT
from infra.reporting import p99, render

GROCERY = grocery_crashtest_args("bench")
PAYMENTS = [
    "--worker", "examples.payments.worker:unkeyed_worker",
    "--workflow", "examples.payments.workflow:PaymentsWorkflow",
    "--input", '{"customer": "bench", "invoices": ["inv-1", "inv-2", "inv-3"]}',
    "--observe", "examples.payments.observe:payments_of",
]  # fmt: skip


def sequence(charges: int) -> list[str]:
    return [
        "--worker", "examples.shapes.sequence:keyed_worker",
        "--workflow", "examples.shapes.sequence:ChargeEach",
        "--input", str(charges),
        "--observe", "examples.shapes.ledger:effects_of",
    ]  # fmt: skip


class Timing(BaseModel):
    """One crash test, `n` whole runs of it in one mode."""

    target: str
    mode: str  # fast | real
    boundaries: int
    cells: int
    failing: int  # cells that differ from the reference (the same in both modes)
    median_s: float
    p99_s: float
    n: int

    @property
    def cells_per_s(self) -> float:
        return self.cells / self.median_s

    @property
    def s_per_boundary(self) -> float:
        return self.median_s / self.boundaries


@dataclass
class _Sample:
    seconds: float
    boundaries: int
    cells: int
    failing: int
    verdicts: list[tuple[str, bool]]


class CrashtestError(RuntimeError):
    pass


async def _one(args: list[str], env: dict[str, str], json_path: Path) -> _Sample:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "temporal_crashtest",
        "run",
        *args,
        "--json",
        str(json_path),
        cwd=PROJECT_ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    seconds = time.perf_counter() - started
    report = _report(json_path)
    if proc.returncode not in (0, 1) or report is None:
        last = err.decode(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise CrashtestError(f"crashtest exited {proc.returncode}: {last[0]}")
    verdicts = [(c["crash_at"], c["matches"]) for c in report["cells"]]
    return _Sample(
        seconds,
        len(report["activities"]),
        len(report["cells"]),
        sum(not ok for _, ok in verdicts),
        verdicts,
    )


def _report(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def _timing(target: str, mode: str, samples: list[_Sample]) -> Timing:
    seconds = [s.seconds for s in samples]
    first = samples[0]
    return Timing(
        target=target,
        mode=mode,
        boundaries=first.boundaries,
        cells=first.cells,
        failing=first.failing,
        median_s=round(statistics.median(seconds), 2),
        p99_s=round(p99(seconds), 2),
        n=len(samples),
    )


async def measure(
    target: str,
    args: list[str],
    env: dict[str, str],
    runs: int,
    out: Path,
    progress: Callable[[str], None],
) -> tuple[Timing, Timing]:
    """`runs` whole crash tests fast and as many with `--real-timeouts`, alternating. The
    verdicts must agree, cell by cell, in every run."""
    samples: dict[str, list[_Sample]] = {"fast": [], "real": []}
    for i in range(runs):
        for mode, extra in (("fast", []), ("real", ["--real-timeouts"])):
            progress(f"crashtest {target}: {mode} run {i + 1}/{runs}")
            path = out / f"{target.replace(' ', '-')}-{mode}-{i}.json"
            samples[mode].append(await _one([*args, *extra], env, path))
    verdicts = {tuple(s.verdicts) for group in samples.values() for s in group}
    if len(verdicts) != 1:
        raise CrashtestError(f"crashtest {target}: the verdicts differ between runs: {verdicts}")
    return _timing(target, "fast", samples["fast"]), _timing(target, "real", samples["real"])


def table(timings: list[Timing]) -> str:
    head = [
        "crash test",
        "mode",
        "bounds",
        "cells",
        "failing",
        "median s",
        "p99 s",
        "n",
        "cells/s",
        "s/boundary",
    ]
    rows = [
        [
            t.target,
            t.mode,
            str(t.boundaries),
            str(t.cells),
            str(t.failing),
            f"{t.median_s:.2f}",
            f"{t.p99_s:.2f}",
            str(t.n),
            f"{t.cells_per_s:.2f}",
            f"{t.s_per_boundary:.2f}",
        ]
        for t in timings
    ]
    return render(head, rows)


def ratios(timings: list[Timing]) -> list[str]:
    """real / fast for every target measured both ways."""
    by = {(t.target, t.mode): t for t in timings}
    out = []
    for t in timings:
        real = by.get((t.target, "real"))
        if t.mode == "fast" and real is not None:
            out.append(f"{t.target}: --real-timeouts / fast = {real.median_s / t.median_s:.2f}x")
    return out
