"""Which runs a crash test makes: one run per crash point (`exact`), or points crashed in groups.

A group is one run crashed at several points in turn: the first worker is killed at the group's
first point, the worker that takes over is armed for the next, and so on, each kill a real
SIGKILL with the same fast-forward as a cell of its own. Its points are in the order the run
without a crash reached them (`run_order`), so each kill comes after the last one's recovery.

Why a group that ends in the reference state clears each of its points: a crash can only add to
what a run does (an effect made again, a model paid twice); it cannot take away an effect the run
makes anyway. If one point alone repeated an effect, the group's run, killed there too, would
repeat it as well, and its final state would show more than the reference. This holds when the
observed state shows every effect (rows, calls, counts). An observer that can hide an earlier
difference — one that keeps only the last row, or a maximum — may pass a group whose points would
not all pass alone: crash-test such a workflow with `--exact`.

A group that differs is split and its parts run again, down to single points, so that every
failing point ends as a cell of its own with the usual row (what differs, the recovery, what it
waited on). Halves while fewer than half the groups of its kind have failed (one pass counted in
advance); single points at once otherwise, the kind's first failing group included (halving
would then only run every point several times over), so that when every point fails the test
costs little more than `exact`. A group's run that does not reach one of its points (the run
went another way after a kill) clears the points it reached and runs the rest as a group of
their own.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from datetime import datetime

from temporal_crashtest._plan.reference import CellPoint

GROUPS_PER_CORE = 4
MIN_GROUP_S = 1.0  # a group of fewer kills than this saves too little to pay for its split
# What a kill costs its group's run, measured on a 2-core machine (a sequence of 200 activities):
EFFECT_KILL_S = 0.35  # the retry's backoff, the next worker's start, the attempt again
MEASURED_RETRY_S = 0.2  # ... with a retry policy whose first wait is this (a longer one adds)
RUN_OVERHEAD_S = 1.0  # a cell's run besides its activities: start, workers, observe
TASK_KILL_S = 1.1  # and the short workflow task timeout the dead worker's task waits out
REPLAY_S_PER_BOUNDARY = 0.003  # the next worker replays the history up to the point (loaded)
FAILING_SHARE_FOR_SINGLES = 0.5  # of finished groups: split failing groups to single points


def groupable(point: CellPoint) -> bool:
    """A reset runs to the end first, and a repeat crashes at one point again: each is a run of
    its own."""
    return point.repeat == 1 and point.moment.kills_a_worker


def run_order(points: list[CellPoint]) -> list[CellPoint]:
    """The order the run without a crash reached them: an activity's effect when its attempt
    ended, its checkpoint when the workflow task that took its result started (siblings' effects
    come before the task that takes all their results), the task that scheduled it when it was
    scheduled."""

    def when(p: CellPoint) -> tuple[object, ...]:
        b = p.boundary
        if p.moment.kills_as_scheduled or p.moment.kills_while_waiting:  # waits: just before
            return (b.scheduled, int(p.moment.kills_as_scheduled), b.number, 0)
        if p.moment.kills_in_the_workflow:
            return (max(b.taken, b.ended), 1, b.number, 0)
        return (b.ended, 0, b.number, p.effect or math.inf)  # its effects before it returns

    return sorted(points, key=when)


def _weight(point: CellPoint) -> float:
    """About how long a kill at `point` keeps its group's run: the kill and the next worker's
    start (a kill that holds a workflow task waits out the short task timeout; one after an
    effect, the activity's retry policy's first wait before the attempt again), then the next
    worker's replay of the history up to the point."""
    if point.holds_a_task:
        kill = TASK_KILL_S
    else:
        kill = EFFECT_KILL_S + max(0.0, point.boundary.retry_s - MEASURED_RETRY_S)
    return kill + REPLAY_S_PER_BOUNDARY * point.boundary.number


def cut(points: list[CellPoint], count: int) -> list[list[CellPoint]]:
    """`points` as `count` runs of consecutive points of about equal weight."""
    total = sum(map(_weight, points))
    groups: list[list[CellPoint]] = [[]]
    so_far = 0.0
    for point in points:
        middle = so_far + _weight(point) / 2  # a point goes where most of its weight falls
        if groups[-1] and middle > total * len(groups) / count and len(groups) < count:
            groups.append([])
        groups[-1].append(point)
        so_far += _weight(point)
    return groups


def first_groups(points: list[CellPoint], jobs: int) -> list[list[CellPoint]]:
    """The points (in run order) cut into groups: kills after an effect apart from kills that
    hold a workflow task (after a checkpoint, in a local activity), which wait out a short
    workflow task timeout each and fail for other reasons (a workflow that is not deterministic,
    not an effect without a key). Each kind is cut into runs of consecutive points of about
    equal weight (`_weight`), as many groups in all as keep the cores busy (`GROUPS_PER_CORE`:
    a group's run mostly waits, on retries' backoff and timeouts) and no more than run at once,
    each of at least `MIN_GROUP_S` of kills. Every group runs the whole workflow, and each kill
    replays the history up to it: more groups than that only add work."""
    if not points:
        return []
    kinds = [[p for p in points if not p.holds_a_task], [p for p in points if p.holds_a_task]]
    weights = [sum(map(_weight, kind)) for kind in kinds]
    runs = min(jobs, GROUPS_PER_CORE * (os.cpu_count() or 1))
    run_s = _run_s(points)
    budget = _exact_budget(points, jobs, run_s)
    groups = []
    for kind, weight in zip(kinds, weights, strict=True):
        if kind and _outweighs_a_run(weight / len(kind), run_s):
            # A kill costs more than a whole run (a retry that waits seconds): a group would
            # only add its kills' waits up, and a run per point is never slower.
            groups += [[point] for point in kind]
        elif kind:
            share = max(1, round(runs * weight / sum(weights)))
            count = min(share, len(kind), max(1, int(weight / MIN_GROUP_S)))
            # No group should keep its run longer than --exact would take for all the points,
            # with no more groups than run at once.
            at_once = max(1, round(jobs * weight / sum(weights)))
            count = min(len(kind), max(count, min(math.ceil(weight / budget), at_once)))
            groups += cut(kind, count)
    return groups


def plan(
    points: list[CellPoint], jobs: int, *, exact: bool, say: Callable[[str], None]
) -> tuple[list[list[CellPoint]], list[CellPoint]]:
    """The points' first groups (in run order), and the points that run alone (`exact`; resets
    and repeats always; and a kill that waits longer than a run of its own), said in a line."""
    grouped = [] if exact else run_order([p for p in points if groupable(p)])
    in_groups = set(grouped)
    alone = [p for p in points if p not in in_groups]
    groups = first_groups(grouped, jobs)
    run_s = _run_s(grouped)
    lone = [g[0] for g in groups if len(g) == 1 and _outweighs_a_run(_weight(g[0]), run_s)]
    if lone:  # a run of their own, as --exact would
        groups = [g for g in groups if len(g) > 1 or g[0] not in lone]
        alone += lone
        longest = max(p.boundary.retry_s for p in lone)
        say(
            f"{len(lone)} crash points run alone: a kill there waits longer than a run of its "
            f"own takes (the run without a crash: {run_s:.1f} s; the retry policy waits up to "
            f"{longest:g} s before the next attempt), so a group would only add the waits up"
        )
    if groups:
        sizes = sorted({len(g) for g in groups})
        in_all = sum(map(len, groups))
        say(
            f"{in_all} crash points in {len(groups)} group{'s' if len(groups) > 1 else ''} of "
            f"{'-'.join(map(str, sizes[:: max(1, len(sizes) - 1)]))} (one run each; a group "
            "that differs is split down to single points)"
        )
    return groups, alone


def _outweighs_a_run(kill_s: float, run_s: float) -> bool:
    """Whether a kill costs more than a run of its own: the run without a crash's time (0: not
    known) and what any run costs besides (`RUN_OVERHEAD_S`)."""
    return run_s > 0 and kill_s >= run_s + RUN_OVERHEAD_S


def _run_s(points: list[CellPoint]) -> float:
    """About how long the run without a crash took, from its boundaries (0: not known)."""
    starts = [p.boundary.scheduled for p in points if p.boundary.scheduled != datetime.min]
    ends = [p.boundary.ended for p in points if p.boundary.ended != datetime.min]
    return (max(ends) - min(starts)).total_seconds() if starts and ends else 0.0


def _exact_budget(points: list[CellPoint], jobs: int, run_s: float) -> float:
    """How long one group's kills may take, so that grouping is never slower than `exact`: a
    run per point, `jobs` at a time, each the whole run (as long as the run without a crash
    took) and its kill; less the group's own run."""
    mean_kill = sum(map(_weight, points)) / len(points)
    rounds = math.ceil(len(points) / max(1, jobs))
    return max(MIN_GROUP_S, rounds * (run_s + mean_kill) - run_s)


class Splits:
    """How a failing group is split, from how many groups of its kind (kills after an effect,
    kills that hold a task) have failed so far: an effect without a key fails at every kill
    after it, a checkpoint seldom."""

    def __init__(self) -> None:
        self.finished = 1  # a passing group, counted in advance: one early failure is no trend
        self.failed = 0

    def record(self, failed: bool) -> None:
        self.finished += 1
        self.failed += failed

    def parts(self, points: list[CellPoint]) -> list[list[CellPoint]]:
        if len(points) <= 2 or self.failed / self.finished >= FAILING_SHARE_FOR_SINGLES:
            return [[p] for p in points]
        half = math.ceil(len(points) / 2)
        return [points[:half], points[half:]]
