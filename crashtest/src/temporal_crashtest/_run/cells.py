"""The cells of a crash test (`run_cells`): its points run in groups, a group that differs split
down to single points, each point's verdict a `Cell`, at most `jobs` runs at once (`_Runs`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from temporal_crashtest._plan.groups import Splits, plan
from temporal_crashtest._plan.reference import CellPoint, Reference
from temporal_crashtest._report.report import Cell
from temporal_crashtest._run.runner import GroupRun, Runner

ProgressFn = Callable[[int, int, Cell], None]


@dataclass(frozen=True)
class Cells:
    """Every crash point's cell, in the order the points were given, and what it took: the runs
    made (a group's run, a cell's; not the reference) and how many groups the points began in."""

    cells: list[Cell]
    runs: int
    groups: int


def _span(points: list[CellPoint]) -> str:
    if len(points) == 1:
        return points[0].crash_at
    return f"{points[0].crash_at} … {points[-1].crash_at}"


async def run_cells(
    runner: Runner,
    points: list[CellPoint],
    reference: Reference,
    jobs: int,
    *,
    exact: bool = False,
    progress: ProgressFn | None = None,
    say: Callable[[str], None] | None = None,
) -> Cells:
    """Every crash point's verdict, `jobs` runs at a time: a cell per point (`exact`, and
    resets and repeats always), or the points in groups, split where they differ."""
    tell = say or (lambda _: None)
    runs = _Runs(runner, reference, jobs, len(points), progress, tell)
    groups, alone = plan(points, jobs, exact=exact, say=tell)
    async with asyncio.TaskGroup() as tasks:
        for members in groups:
            tasks.create_task(runs.group(tasks, members))
        for point in alone:
            tasks.create_task(runs.single(point))
    return Cells([runs.done[p] for p in points], runs.made, len(groups))


class _Runs:
    """The runs of one crash test's cells and groups, at most `jobs` at a time, and the cells
    they have decided (`done`)."""

    def __init__(
        self,
        runner: Runner,
        reference: Reference,
        jobs: int,
        total: int,
        progress: ProgressFn | None,
        tell: Callable[[str], None],
    ) -> None:
        self.runner, self.reference = runner, reference
        self.limit = asyncio.Semaphore(jobs)
        self.total, self.progress, self.tell = total, progress, tell
        self.done: dict[CellPoint, Cell] = {}
        self.made = 0  # runs made: a group's, a cell's
        self.splits = {kind: Splits() for kind in (False, True)}  # by: the kills hold a task

    def record(self, point: CellPoint, cell: Cell) -> None:
        self.done[point] = cell
        if self.progress is not None:
            self.progress(len(self.done), self.total, cell)

    async def single(self, point: CellPoint) -> None:
        """A cell of its own."""
        async with self.limit:
            self.made += 1
            cell = await self.runner.cell(point, self.reference)
        self.record(point, cell)

    async def group(self, tasks: asyncio.TaskGroup, members: list[CellPoint]) -> None:
        """One run crashed at each of `members`: the points it reached clear if it ends as the
        reference did; those it did not reach, and the parts of one that differs, run again."""
        if len(members) == 1:
            await self.single(members[0])
            return
        async with self.limit:
            self.made += 1
            outcome = await self.runner.group(members, self.reference)
        reached, rest = members[: outcome.reached], members[outcome.reached :]
        if outcome.why is None:
            for point in reached:
                self.record(point, _cleared(point, outcome))
        if rest:  # not reached: the run went another way; the first of them on its own
            parts = [rest] if reached else [rest[:1], rest[1:]]
            for part in (p for p in parts if p):
                tasks.create_task(self.group(tasks, part))
        if not reached:
            return
        kind = self.splits[reached[0].holds_a_task]
        kind.record(outcome.why is not None)
        if outcome.why is not None:
            parts = kind.parts(reached)
            self.tell(
                f"the group {_span(reached)} ({len(reached)} points) differs ({outcome.why}): "
                f"run again as {' + '.join(str(len(p)) for p in parts)}"
            )
            for part in parts:
                tasks.create_task(self.group(tasks, part))


def _cleared(point: CellPoint, outcome: GroupRun) -> Cell:
    return Cell(
        workflow_id=outcome.workflow_id,
        crash_at=point.crash_at,
        activity=point.label,
        matches=True,
        observed=outcome.observed,
        diff=None,
        recovery_s=None,
        seconds=outcome.seconds,
        crashes=1,
        group=outcome.reached,
        workflow_s=outcome.workflow_s,
    )
