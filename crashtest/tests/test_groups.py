"""How crash points are grouped into runs and split, in process (no server): groups keep the run's
order and every point once, kills that hold a workflow task are grouped apart, and a group that
differs is halved while few fail, and cut to single points when most do."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from temporal_crashtest._history.tree import Boundary
from temporal_crashtest._plan.groups import Splits, first_groups, groupable, run_order
from temporal_crashtest._plan.reference import CellPoint
from temporal_crashtest._points.points import Moment

START = datetime(2026, 12, 1)


def sequence(n: int, parallel: int = 1) -> list[Boundary]:
    """n activities; each `parallel` in a row scheduled together, ending one after another, and
    their results taken by one workflow task."""
    out = []
    for i in range(1, n + 1):
        batch = (i - 1) // parallel
        ended = START + timedelta(seconds=i)
        taken = START + timedelta(seconds=(batch + 1) * parallel, milliseconds=500)
        b = Boundary(
            number=i, scope="@1", position=i, activity="charge", local=False,
            label=f"charge#{i}", occurrence=i, activity_id=str(i), workflow_id="wf",
            run_id="run", reset_event_id=batch + 1, ended=ended, taken=taken,
        )  # fmt: skip
        out.append(b)
    return out


def points(boundaries: list[Boundary]) -> list[CellPoint]:
    """The default set's points at `boundaries` (at an effect: one each effect made; none
    while the run waits: these boundaries have no timer before them)."""
    return [
        CellPoint(m, b, 1, k)
        for m in Moment.default_set()
        if not m.kills_while_waiting
        for b in boundaries
        for k in (range(1, len(b.effects) + 1) if m.kills_at_an_effect else [0])
    ]


def names(group: list[CellPoint]) -> list[str]:
    return [p.crash_at for p in group]


def test_points_are_in_the_order_the_run_reached_them() -> None:
    assert names(run_order(points(sequence(3)))) == [
        "after-effect:1", "after-checkpoint:1", "after-effect:2", "after-checkpoint:2",
        "after-effect:3", "after-checkpoint:3",
    ]  # fmt: skip
    # Siblings: every effect comes before the task that takes all their results.
    assert names(run_order(points(sequence(3, parallel=3)))) == [
        "after-effect:1", "after-effect:2", "after-effect:3",
        "after-checkpoint:1", "after-checkpoint:2", "after-checkpoint:3",
    ]  # fmt: skip


def test_an_activitys_effects_come_before_it_returns() -> None:
    made = sequence(2)
    made[1] = replace(made[1], effects=("charged", "mailed"))
    assert names(run_order(points(made))) == [
        "after-effect:1", "after-checkpoint:1",
        "effect:2.1", "effect:2.2", "after-effect:2", "after-checkpoint:2",
    ]  # fmt: skip


def test_groups_hold_every_point_once_in_run_order_kinds_apart() -> None:
    every = run_order(points(sequence(200)))
    groups = first_groups(every, jobs=16)
    assert sorted(names([p for g in groups for p in g])) == sorted(names(every))
    for group in groups:
        assert group == [p for p in every if p in group]  # consecutive, in run order
        assert len({p.moment for p in group}) == 1
    assert 2 <= len(groups) <= 16
    # A kill that holds a workflow task waits out its timeout: those groups are smaller.
    effects = [len(g) for g in groups if not g[0].moment.kills_in_the_workflow]
    checkpoints = [len(g) for g in groups if g[0].moment.kills_in_the_workflow]
    assert max(checkpoints) < min(effects)
    # Later kills replay longer histories: later groups of a kind hold fewer points.
    assert effects == sorted(effects, reverse=True)
    # Few points: no group is worth less than a second of kills.
    small = first_groups(run_order(points(sequence(2))), jobs=16)
    assert [names(g) for g in small] == [
        ["after-effect:1", "after-effect:2"], ["after-checkpoint:1"], ["after-checkpoint:2"]
    ]  # fmt: skip


def test_resets_and_repeats_run_alone() -> None:
    b = sequence(1)[0]
    assert groupable(CellPoint(Moment.AFTER_EFFECT, b))
    assert not groupable(CellPoint(Moment.AFTER_EFFECT, b, repeat=2))
    assert not groupable(CellPoint(Moment.RESET, b))


def test_a_failing_group_is_halved_while_few_fail_and_cut_to_points_when_most_do() -> None:
    group = run_order(points(sequence(8)))[:8]
    splits = Splits()
    for _ in range(3):
        splits.record(failed=False)
    splits.record(failed=True)
    assert [len(p) for p in splits.parts(group)] == [4, 4]
    for _ in range(4):
        splits.record(failed=True)
    assert [len(p) for p in splits.parts(group)] == [1] * 8
    assert [len(p) for p in Splits().parts(group[:2])] == [1, 1]
