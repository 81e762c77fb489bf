"""The deploy matrix: runs in flight when the agent's next version ships, on every engine.

A cell is an engine, a design (how its keys name a step: by the step's own number, by its place
in the run, or no key), a change (how the price check ships) and a moment. Its run is killed in
a process (or worker) of one release and taken over by one of the other, as a deploy does:

- `patched`      the release before -> today's: the price check behind the engine's versioning
                 (Temporal's `workflow.patched`, DBOS's `DBOS.patch_async`, the journal's
                 "only in a run that has not saved its order").
- `unversioned`  the release before -> the price check with no versioning (journal, DBOS; on
                 Temporal, `examples.deploys`' v1 -> v2 is the same change and blocks the run).
- `rollback`     today's -> the release before: the deploy undone while runs are in flight.

Each cell ends `ok` (the no-crash state: 3 model calls, 1 order, 1 email), `dup` (an effect or
a paid model call made twice), `blocked` (the run stops in an error and stays unfinished) or
`lost` (it ends with an effect missing), and must end as `EXPECTED` says. Temporal's cells are
deploy crash tests (`--deploy-to`), one per design and change, its points named by activity.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporal_crashtest import Cell, CrashTestOptions, Version, run_crash_test

from agent.outcome import ONE_RUN_COUNTS, final_state
from agent.releases import Release
from crashlab.cells import MatrixCell, refuse_unknown
from crashlab.engines import engine_named
from crashlab.lab import (
    RESULT_TIMEOUT_S,
    Deploy,
    Lab,
    ResumeFailed,
    counts,
    grocery_target,
    named_point,
    opened_lab,
)
from infra.errors import ConfigError
from infra.reporting import render


class Verdict(StrEnum):
    OK = "ok"  # the no-crash state
    DUP = "dup"  # more model calls, orders or emails than a run that never crashed
    BLOCKED = "blocked"  # the run stopped in an error: unfinished until a fix ships
    LOST = "lost"  # the run ended with fewer effects than a run that never crashed


class Change(StrEnum):
    PATCHED = "patched"
    UNVERSIONED = "unversioned"
    ROLLBACK = "rollback"


RELEASES = {
    Change.PATCHED: Deploy(Release.BEFORE, Release.TODAY),
    Change.UNVERSIONED: Deploy(Release.BEFORE, Release.UNVERSIONED),
    Change.ROLLBACK: Deploy(Release.TODAY, Release.BEFORE),
}
# Temporal's versions as worker factories: the release before, today's, and the price check
# shipped the guide's way with positional activity ids.
V1, TODAY, BY_POSITION = (
    "examples.deploys.grocery:v1_worker",
    "worker:build_worker",
    "examples.deploys.grocery:by_position_worker",
)
# The moments, as the matrix names them (a step by its number: 3 choose, 4 place_order, 5
# send_confirmation), and as a Temporal crash test names them (by activity).
MOMENTS = {
    "after-checkpoint:3": "after-checkpoint:choose",  # the run stands where the check goes
    "after-effect:4": "after-effect:place_order",  # the order placed, not yet recorded
    "after-checkpoint:4": "after-checkpoint:place_order",  # the order recorded
    "after-effect:5": "after-effect:send_confirmation",  # the email sent, not yet recorded
    "in-task:4": "in-task:place_order",  # Temporal: the workflow task before the order
    "reset:4": "reset:place_order",  # Temporal: reset on the new version to before the order
}

OK, DUP, BLOCKED = Verdict.OK, Verdict.DUP, Verdict.BLOCKED
# The verdict each design must get, moment by moment: the first of MOMENTS, as many as its row
# has (the process engines: the first four; Temporal: all). Why, in docs/deploys.md's table.
EXPECTED: dict[tuple[str, str, Change], tuple[Verdict, ...]] = {
    # The journal: steps saved by number and name. By number, any change is safe; by position,
    # the inserted check takes the order's number (its key moves: dup) or its saved row
    # (DeterminismError: blocked).
    ("journal", "durable", Change.PATCHED): (OK, OK, OK, OK),
    ("journal", "durable", Change.UNVERSIONED): (OK, OK, OK, OK),
    ("journal", "durable", Change.ROLLBACK): (OK, OK, OK, OK),
    ("journal", "positional", Change.PATCHED): (OK, DUP, OK, OK),
    ("journal", "positional", Change.UNVERSIONED): (OK, DUP, BLOCKED, BLOCKED),
    ("journal", "positional", Change.ROLLBACK): (OK, BLOCKED, BLOCKED, BLOCKED),
    ("journal", "checkpoint", Change.PATCHED): (OK, DUP, OK, DUP),
    ("journal", "checkpoint", Change.UNVERSIONED): (OK, DUP, OK, DUP),
    ("journal", "checkpoint", Change.ROLLBACK): (OK, DUP, OK, DUP),
    # DBOS: step ids are positions, and a recorded step of another name is
    # DBOSUnexpectedStepError. Keys by number survive the patched deploy; nothing survives
    # the rollback (the patch marker sits where the release before records its order).
    ("dbos", "keyed", Change.PATCHED): (OK, OK, OK, OK),
    ("dbos", "keyed", Change.UNVERSIONED): (OK, OK, BLOCKED, BLOCKED),
    ("dbos", "keyed", Change.ROLLBACK): (BLOCKED, BLOCKED, BLOCKED, BLOCKED),
    ("dbos", "position", Change.PATCHED): (OK, DUP, OK, OK),
    ("dbos", "position", Change.UNVERSIONED): (OK, DUP, BLOCKED, BLOCKED),
    ("dbos", "position", Change.ROLLBACK): (BLOCKED, BLOCKED, BLOCKED, BLOCKED),
    ("dbos", "none", Change.PATCHED): (OK, DUP, OK, DUP),
    ("dbos", "none", Change.UNVERSIONED): (OK, DUP, BLOCKED, BLOCKED),
    ("dbos", "none", Change.ROLLBACK): (BLOCKED, BLOCKED, BLOCKED, BLOCKED),
    # Temporal: a replayed run keeps its recorded path; a reset replays on the new code.
    ("temporal", "workflow", Change.PATCHED): (OK, OK, OK, OK, OK, OK),
    ("temporal", "position", Change.PATCHED): (OK, OK, OK, OK, OK, DUP),
    ("temporal", "none", Change.PATCHED): (OK, DUP, OK, DUP, OK, DUP),
    ("temporal", "workflow", Change.ROLLBACK): (OK, BLOCKED, BLOCKED, BLOCKED, BLOCKED, BLOCKED),
}
# Temporal's designs: the worker factories of (before, after) per change, and its key strategy.
TEMPORAL_VERSIONS = {
    ("workflow", Change.PATCHED): (V1, TODAY),
    ("position", Change.PATCHED): (V1, BY_POSITION),
    ("none", Change.PATCHED): (V1, TODAY),
    ("workflow", Change.ROLLBACK): (TODAY, V1),
}
KEY_STRATEGY = {"workflow": "workflow", "position": "workflow", "none": "none"}


class DeployCell(BaseModel, frozen=True):
    engine: str
    design: str
    change: Change
    moment: str  # a key of MOMENTS

    @property
    def expected(self) -> Verdict:
        return EXPECTED[self.engine, self.design, self.change][list(MOMENTS).index(self.moment)]


class DeployResult(BaseModel):
    cell: DeployCell
    verdict: Verdict
    model_calls: int
    orders: int
    emails: int
    keys: list[str]  # the orders' and emails' keys, as `order :4` (`order -`: no key)
    seconds: float
    why: str | None = None  # a blocked run's error, an unrunnable cell's

    @property
    def as_expected(self) -> bool:
        return self.verdict is self.cell.expected

    @property
    def counts(self) -> str:
        return f"{self.model_calls}/{self.orders}/{self.emails}"


def all_deploy_cells(engine: str | None = None) -> list[DeployCell]:
    """Every cell, or an engine's: each (engine, design, change) of EXPECTED at its moments (the
    first of MOMENTS, one per verdict its row expects)."""
    cells = []
    for (name, design, change), verdicts in EXPECTED.items():
        if engine is not None and name != engine:
            continue
        moments = tuple(MOMENTS)[: len(verdicts)]
        cells += [DeployCell(engine=name, design=design, change=change, moment=m) for m in moments]
    if not cells:
        engines = ", ".join(dict.fromkeys(name for name, _, _ in EXPECTED))
        raise ConfigError(f"unknown engine {engine!r}; the engines: {engines}")
    return cells


def select_deploy_cells(
    cells: list[DeployCell],
    designs: list[str] | None,
    changes: list[str] | None,
    moments: list[str] | None,
) -> list[DeployCell]:
    """Keep the cells of the named designs, changes and moments; an unknown name is an error."""
    refuse_unknown(
        (designs, {c.design for c in cells}, "design"),
        (changes, {str(c.change) for c in cells}, "change"),
        (moments, {c.moment for c in cells}, "moment"),
    )
    return [
        c
        for c in cells
        if (designs is None or c.design in designs)
        and (changes is None or c.change in changes)
        and (moments is None or c.moment in moments)
    ]


def verdict_of(state: dict[str, Any] | None, why: str | None) -> Verdict:
    found = counts(state) if state else (0, 0, 0)
    if any(n > one for n, one in zip(found, ONE_RUN_COUNTS, strict=True)):
        return Verdict.DUP
    if why is not None:
        return Verdict.BLOCKED
    return Verdict.OK if found == ONE_RUN_COUNTS else Verdict.LOST


_KEYS = """
select 'order', idempotency_key from (select * from orders where run_id = %(run)s order by id) o
union all
select 'email', idempotency_key from (select * from emails where run_id = %(run)s order by id) e
"""


class DeployLab:
    def __init__(self, lab: Lab, progress: Callable[[DeployResult], None]) -> None:
        self.lab = lab
        self.progress = progress

    async def keys(self, run_id: str) -> list[str]:
        """Each order's and email's key, by what follows the run id (the step it belongs to)."""
        async with self.lab.pool.connection() as conn:
            rows = await (await conn.execute(_KEYS, {"run": run_id})).fetchall()
        return [f"{what} {key.removeprefix(run_id) if key else '-'}" for what, key in rows]

    async def result(
        self, cell: DeployCell, run_id: str, state: Any, why: str | None, started: float
    ) -> DeployResult:
        calls, orders, emails = counts(state) if state else (0, 0, 0)
        result = DeployResult(
            cell=cell,
            verdict=verdict_of(state, why),
            model_calls=calls,
            orders=orders,
            emails=emails,
            keys=await self.keys(run_id),
            seconds=round(time.monotonic() - started, 2),
            why=why,
        )
        self.progress(result)
        return result

    async def process_cell(self, cell: DeployCell) -> DeployResult:
        """Killed in a process of one release at the moment, resumed in one of the other."""
        started = time.monotonic()
        point = cell.moment.replace(":", "")
        run_id = f"deploy-{cell.engine}-{cell.design}-{cell.change}-{point}-{uuid.uuid4().hex[:6]}"
        matrix_cell = MatrixCell(engine=cell.engine, design=cell.design, crash_at=cell.moment)
        state: Any = None
        why = None
        try:
            state = await self.lab.process_state(matrix_cell, run_id, RELEASES[cell.change])
        except ResumeFailed as err:
            why = str(err)
            state = await final_state(run_id)
        except Exception as err:
            why = f"the cell could not run: {type(err).__name__}: {err}"
        return await self.result(cell, run_id, state, why, started)

    async def temporal_cells(self, cells: list[DeployCell]) -> list[DeployResult]:
        """One deploy crash test for the cells of one design and change."""
        started = time.monotonic()
        first = cells[0]
        before, after = TEMPORAL_VERSIONS[first.design, first.change]
        env = {"DATABASE_URL": self.lab.db_url}
        target = replace(
            grocery_target(KEY_STRATEGY[first.design], **env),
            old=Version(before),
            new=Version(after),
        )
        by_point = {MOMENTS[c.moment]: c for c in cells}
        options = CrashTestOptions(
            points=list(by_point),
            jobs=self.lab.jobs,
            address=self.lab.address,
            deadline_s=RESULT_TIMEOUT_S,
            logs=self.lab.log_dir / f"deploy-{first.design}-{first.change}",
        )
        try:
            report = await run_crash_test(target, final_state, options)
        except Exception as err:
            why = f"the crash test could not run: {type(err).__name__}: {err}"
            return [await self.result(c, "-", None, why, started) for c in cells]
        return [await self.crashed(by_point[named_point(c)], c) for c in report.cells]

    async def crashed(self, cell: DeployCell, crashed: Cell) -> DeployResult:
        """A crash test's cell: its run's state, and why it did not match, if it did not."""
        why = None if crashed.matches else (crashed.error or crashed.diff or "did not match")
        started = time.monotonic() - crashed.seconds
        return await self.result(cell, crashed.workflow_id, crashed.observed, why, started)


def print_progress(done: int, total: int, result: DeployResult) -> None:
    c = result.cell
    mark = "✓" if result.verdict is Verdict.OK else "✗"
    flag = "" if result.as_expected else f"  UNEXPECTED (expected {c.expected})"
    print(
        f"[{done:>3}/{total}] {c.engine}/{c.design:<10} {c.change:<11} {c.moment:<18} "
        f"{mark} {result.verdict:<7} {result.counts}  {result.seconds:5.1f} s{flag}",
        file=sys.stderr,
        flush=True,
    )


def _cell_text(r: DeployResult) -> str:
    mark = "✓" if r.verdict is Verdict.OK else "✗"
    text = f"{mark} {r.counts}" if r.verdict is not Verdict.BLOCKED else "✗ blocked"
    return text + ("" if r.as_expected else " (!)")


class DeployReport(BaseModel):
    cells: list[DeployResult]
    seconds: float

    @property
    def unexpected(self) -> list[DeployResult]:
        return [r for r in self.cells if not r.as_expected]

    def table(self, *, markdown: bool = False) -> str:
        rows: dict[tuple[str, str, Change], dict[str, DeployResult]] = {}
        for r in self.cells:
            rows.setdefault((r.cell.engine, r.cell.design, r.cell.change), {})[r.cell.moment] = r
        head = ["engine / design / change", *MOMENTS]
        body = []
        for (engine, design, change), by_moment in rows.items():
            texts = [_cell_text(by_moment[m]) if m in by_moment else "—" for m in MOMENTS]
            body.append([f"{engine} / {design} / {change}", *texts])
        return render(head, body, markdown=markdown)

    def details(self) -> list[str]:
        """A line per cell that did not end in the no-crash state: its rows' keys, or why."""
        lines = []
        for r in self.cells:
            if r.verdict is Verdict.OK:
                continue
            c = r.cell
            what = f"keys: {', '.join(r.keys)}" if r.verdict is Verdict.DUP else (r.why or "")
            what = what if len(what) <= 200 else what[:199] + "…"
            lines.append(f"{c.engine}/{c.design} {c.change} {c.moment}: {r.verdict}; {what}")
        return lines


async def run_deploy_matrix(
    cells: list[DeployCell],
    *,
    jobs: int = 4,
    progress: Callable[[int, int, DeployResult], None] = print_progress,
    log_dir: Path | None = None,
) -> DeployReport:
    """Every cell: the process engines' `jobs` at once, beside a deploy crash test per
    Temporal design and change; each process engine's no-crash reference first."""
    started = time.monotonic()
    results: list[DeployResult] = []

    def done(result: DeployResult) -> None:
        results.append(result)
        progress(len(results), len(cells), result)

    temporal: dict[tuple[str, Change], list[DeployCell]] = {}
    processes = []
    for cell in cells:
        if engine_named(cell.engine).on_temporal:
            temporal.setdefault((cell.design, cell.change), []).append(cell)
        else:
            processes.append(cell)
    on_temporal = bool(temporal)
    async with opened_lab("deploys-", jobs=jobs, on_temporal=on_temporal, log_dir=log_dir) as lab:
        deploys = DeployLab(lab, done)
        limit = asyncio.Semaphore(jobs)

        async def one(cell: DeployCell) -> DeployResult:
            async with limit:
                return await deploys.process_cell(cell)

        await asyncio.gather(
            *(one(c) for c in processes),
            *(deploys.temporal_cells(group) for group in temporal.values()),
        )
    order = {c: i for i, c in enumerate(cells)}
    ordered = sorted(results, key=lambda r: order[r.cell])
    return DeployReport(cells=ordered, seconds=round(time.monotonic() - started, 1))
