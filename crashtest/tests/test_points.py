"""crashtest's naming and choosing of boundaries, in process (no server): how a tree's runs are
named in labels, and how a crash point the user writes finds its boundary."""

from __future__ import annotations

import re

import pytest
from temporal_crashtest._errors import CrashPointError
from temporal_crashtest._history.tree import Boundary, Tree, scope_names
from temporal_crashtest._plan.reference import Reference
from temporal_crashtest._points.points import GLOSSARY, SYNTAX, CrashPoint, Moment
from temporal_crashtest._points.sites import CrashSite


def test_scopes_are_named_by_their_place_in_the_tree() -> None:
    scopes = {"@1", "@2", "@1/Charge#1@1", "@1/Charge#2@1", "@2/Notify#1@1", "@2/Notify#1@2"}
    assert scope_names(scopes) == {
        "@1": "run 1: ",
        "@2": "run 2: ",
        "@1/Charge#1@1": "run 1: Charge#1/",  # two Charge children: numbered
        "@1/Charge#2@1": "run 1: Charge#2/",
        "@2/Notify#1@1": "run 2: Notify (run 1)/",  # a child that continued as new
        "@2/Notify#1@2": "run 2: Notify (run 2)/",
    }
    assert scope_names({"@1", "@1/Charge#1@1"}) == {"@1": "", "@1/Charge#1@1": "Charge/"}


def boundary(number: int, scope: str, position: int, activity: str, label: str, *,
             local: bool = False, occurrence: int = 1, task: int = 1) -> Boundary:  # fmt: skip
    return Boundary(
        number=number, scope=scope, position=position, activity=activity, local=local,
        label=label, occurrence=occurrence, activity_id=str(position), workflow_id="wf",
        run_id="run", reset_event_id=task,
    )  # fmt: skip


def reference() -> Reference:
    boundaries = [
        boundary(1, "@1", 1, "charge", "run 1: charge (local)", local=True, task=4),
        boundary(2, "@1", 2, "notify", "run 1: notify", task=4),
        boundary(3, "@1/Child#1@1", 1, "charge", "run 1: Child/charge", occurrence=2),
        boundary(4, "@2", 1, "charge", "run 2: charge (local)", local=True, occurrence=3, task=4),
    ]
    return Reference({"charges": 3}, Tree([], boundaries))


def test_a_crash_point_finds_its_boundary_by_position_label_or_type() -> None:
    ref = reference()
    assert ref.resolve("after-effect:2").boundary.label == "run 1: notify"
    assert ref.resolve("after-effect:run 1: Child/charge").boundary.number == 3
    assert ref.resolve("after-effect:charge#3").boundary.number == 4
    point = ref.resolve("after-effect:charge*2")
    assert (point.boundary.number, point.repeat, point.crash_at) == (1, 2, "after-effect:1*2")
    assert point.site() == CrashSite(moment=Moment.AFTER_EFFECT, scope="@1", position=1)
    assert CrashSite.parse(point.site().to_text()) == point.site()
    for text, message in [
        ("after-effect:9", "this workflow has boundaries 1..4"),
        ("after-effect:refund", "no boundary is named 'refund'; its activities: charge, notify"),
        ("reset:3", "is in a child workflow; an operator resets the root workflow"),
        # The last local activity of run 2: its marker is recorded with the run's end.
        ("after-checkpoint:4", "the workflow task that records its marker also ends its run"),
    ]:
        with pytest.raises(CrashPointError, match=message):
            ref.resolve(text)


def test_every_point_and_what_is_left_untested() -> None:
    points, untested = reference().every_point()
    assert [p.crash_at for p in points] == [
        "after-effect:1", "after-effect:2", "after-effect:3", "after-effect:4",
        "after-checkpoint:1", "after-checkpoint:2", "after-checkpoint:3",
    ]  # fmt: skip
    # The last boundary's after-checkpoint is declined, and says why (not left out silently).
    assert [(u.boundary, u.why.split(":")[0]) for u in untested] == [
        (
            "after-checkpoint:4 (run 2: charge (local))",
            "the workflow task that records its marker also ends its run",
        )
    ]
    # in-task is reachable at every boundary, the last one too (its task schedules it).
    chosen, _ = reference().select(["in-task:1", "in-task:4"])
    assert [p.crash_at for p in chosen] == ["in-task:1", "in-task:4"]
    chosen, untested = reference().select(["after-effect:notify"])
    assert [p.crash_at for p in chosen] == ["after-effect:2"]
    assert [u.boundary for u in untested] == [
        "run 1: charge (local)", "run 1: Child/charge", "run 2: charge (local)",
    ]  # fmt: skip


def test_each_effect_an_activity_made_is_a_point() -> None:
    """The run without a crash said which effects each activity made: each is a point of the
    default set, named by its boundary and its place; one it did not make is an error."""
    ref = reference()
    said = [{"scope": "@1", "position": 2, "attempt": 1, "what": "sent"},
            {"scope": "@1", "position": 2, "attempt": 2, "what": "charged"},
            {"scope": "@1", "position": 2, "attempt": 2, "what": "sent"}]  # fmt: skip
    ref = Reference(ref.observed, ref.tree.with_effects(said))
    assert ref.boundaries[1].effects == ("charged", "sent")  # the last attempt's
    points, _ = ref.every_point()
    inside = [p for p in points if p.moment is Moment.EFFECT]
    assert [p.crash_at for p in inside] == ["effect:2.1", "effect:2.2"]
    assert inside[1].label == "run 1: notify, effect 2 (sent)"
    assert inside[1].site() == CrashSite(moment=Moment.EFFECT, scope="@1", position=2, effect=2)
    assert ref.resolve("effect:notify.2") == inside[1]
    with pytest.raises(CrashPointError, match=re.escape("it made 0 effect(s) in the run")):
        ref.resolve("effect:1")
    with pytest.raises(CrashPointError, match=re.escape("made 2 effect(s) (charged, sent)")):
        ref.resolve("effect:2.3")


def test_crash_points_are_parsed() -> None:
    assert CrashPoint.parse("after-effect:3") == CrashPoint(moment=Moment.AFTER_EFFECT, position=3)
    assert str(CrashPoint.parse("after-checkpoint:charge#2")) == "after-checkpoint:charge#2"
    assert str(CrashPoint.parse("reset:2")) == "reset:2"
    assert CrashPoint.parse("in-task:2*2") == CrashPoint(
        moment=Moment.IN_TASK, position=2, repeat=2
    )
    # Names as agent frameworks spell them, labels with spaces, and repeats.
    point = CrashPoint.parse("after-effect:agent__mcp_server__call_tool<place_order>#2*2")
    assert (point.activity, point.occurrence, point.repeat) == (
        "agent__mcp_server__call_tool<place_order>", 2, 2)  # fmt: skip
    assert CrashPoint.parse("after-checkpoint:run 2: notify").text == "run 2: notify"
    for text, message in [
        (
            "after-lunch:1",
            "expected effect:N.K, after-effect:N, after-checkpoint:N, in-task:N, wait:N or reset:N",
        ),
        ("after-effect:0", "positions start at 1"),
        ("after-effect:1*9", "*R crashes 1 to 5 times"),
        ("effect:1.0", "effects start at .1"),
        ("reset:1*2", "a reset is not repeated"),
    ]:
        with pytest.raises(CrashPointError, match=re.escape(message)):
            CrashPoint.parse(text)
    # Inside an activity, after its K-th effect (its first, if K is not written).
    assert CrashPoint.parse("effect:2.3") == CrashPoint(moment=Moment.EFFECT, position=2, effect=3)
    assert str(CrashPoint.parse("effect:2")) == "effect:2.1"
    point = CrashPoint.parse("effect:deepagents.invoke_model#2.1*2")
    assert (point.activity, point.occurrence, point.effect, point.repeat) == (
        "deepagents.invoke_model", 2, 1, 2)  # fmt: skip
    # A worker crashing on its own (no history to read labels from): a position or a type.
    assert str(CrashSite.parse("after-effect:place_order")) == "after-effect:place_order"
    assert str(CrashSite.parse("effect:place_order.2")) == "effect:place_order.2"
    with pytest.raises(CrashPointError, match="one worker crashes itself once"):
        CrashSite.parse("after-effect:3*2")
    with pytest.raises(CrashPointError, match="one worker crashes itself once"):
        CrashSite.parse("after-effect")


def test_a_moment_alone_is_its_every_point() -> None:
    """`--points after-effect,after-checkpoint` leaves the points inside activities out (and
    `effect` alone takes only them); a moment alone joins the points named one by one."""
    ref = reference()
    said = [{"scope": "@1", "position": 2, "attempt": 1, "what": "sent"}]
    ref = Reference(ref.observed, ref.tree.with_effects(said))
    assert str(CrashPoint.parse("after-effect")) == "after-effect"
    every, _ = ref.every_point()
    chosen, untested = ref.select(["after-effect", "after-checkpoint"])
    assert chosen == [p for p in every if p.moment is not Moment.EFFECT]
    assert [u.boundary for u in untested] == [u.boundary for u in ref.every_point()[1]]
    chosen, untested = ref.select(["effect", "in-task:1"])
    assert [p.crash_at for p in chosen] == ["effect:2.1", "in-task:1"]
    assert "run 1: Child/charge" in [u.boundary for u in untested]
    with pytest.raises(CrashPointError, match=re.escape("a reset names its boundary (reset:N)")):
        CrashPoint.parse("reset")


def test_each_moment_answers_what_the_code_asks() -> None:
    """The questions the runner, the groups and the interceptor ask of a moment."""
    effect, checkpoint, reset = Moment.AFTER_EFFECT, Moment.AFTER_CHECKPOINT, Moment.RESET
    in_task, inside = Moment.IN_TASK, Moment.EFFECT
    wait = Moment.WAIT
    assert Moment.default_set() == [inside, effect, checkpoint, wait]  # in-task when named
    assert [m for m in Moment if m.kills_while_waiting] == [wait] and not wait.kills_a_worker
    assert effect.kills_in_the_activity and not effect.kills_in_the_workflow
    assert [m for m in Moment if m.kills_at_an_effect] == [inside]
    assert inside.kills_a_worker and not inside.kills_in_the_activity
    assert checkpoint.kills_in_the_workflow and not checkpoint.kills_in_the_activity
    assert in_task.kills_in_the_workflow and in_task.kills_a_worker
    assert [m for m in Moment if m.kills_as_scheduled] == [in_task]
    assert not reset.kills_a_worker and not reset.kills_in_the_activity
    assert [m for m in Moment if m.needs_a_return] == [effect]
    assert [m for m in Moment if m.needs_the_result_seen] == [checkpoint]
    for moment in Moment:
        form = f"{moment}:N.K" if moment.kills_at_an_effect else f"{moment}:N"
        assert form in SYNTAX and f"{form} ({moment.dies})" in GLOSSARY
