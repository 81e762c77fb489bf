"""The run without a crash every cell is compared with (`Reference`: its observed state, how it
ended, the tree of boundaries its histories list), and a crash point resolved against it
(`CellPoint`: a moment at one boundary, the points the reference can reach)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporal_crashtest._errors import CrashPointError
from temporal_crashtest._history.timers import TimerWait, timer_before
from temporal_crashtest._history.tree import (
    CANCELLED,
    COMPLETED,
    FAILED,
    LATER_UNSEEN,
    OPEN,
    TIMED_OUT,
    Boundary,
    Tree,
)
from temporal_crashtest._plan.compare import differences
from temporal_crashtest._points.points import CrashPoint, Moment, Untested, effect_label
from temporal_crashtest._points.sites import CrashSite, in_the_root_chain
from temporal_crashtest._text import span_text


@dataclass(frozen=True)
class CellPoint:
    """One cell's crash: a moment at a boundary, `repeat` times (a reset: once)."""

    moment: Moment
    boundary: Boundary
    repeat: int = 1
    effect: int = 0  # at an effect: the boundary's K-th (`effect:N.K`)
    wait: TimerWait | None = None  # at a wait: the timer the run waits on before the boundary

    @property
    def crash_at(self) -> str:
        return str(
            CrashPoint(
                moment=self.moment,
                position=self.boundary.number,
                effect=self.effect,
                repeat=self.repeat,
            )
        )

    @property
    def label(self) -> str:
        """The boundary's label; at an effect, with the effect's name; at a wait, the timer's."""
        if self.wait is not None:
            return f"{self.boundary.label}, after a timer of {span_text(self.wait.span)}"
        if not self.effect:
            return self.boundary.label
        return effect_label(
            self.boundary.label, self.effect, self.boundary.effects[self.effect - 1]
        )

    def site(self) -> CrashSite:
        return CrashSite(
            moment=self.moment,
            scope=self.boundary.scope,
            position=self.boundary.position,
            effect=self.effect,
            activity_id=self.boundary.activity_id,
            local=self.boundary.local,
            activity_type=self.boundary.activity,
        )

    @property
    def holds_a_task(self) -> bool:
        """Whether the kill comes while the worker holds a workflow task: after a checkpoint, it
        kills in the workflow; a local activity runs inside its workflow task."""
        return self.moment.kills_in_the_workflow or self.boundary.local


def _reachable_after_effect(b: Boundary) -> str | None:
    """Why `after-effect` at `b` has no moment to crash in, if it has none: the moment is when
    an attempt returns (a result, or its last failure) or, completed later by a client, when
    that client sends its end; and in the run without a crash none did — the workflow cancelled
    it (an activity that heartbeats until it is cancelled, by design), it timed out, or it was
    still running when the run ended — or a client the worker does not hold completed it."""
    if b.closed in (COMPLETED, FAILED) and b.ends == LATER_UNSEEN:
        return (
            "it was completed later (activity.raise_complete_async()) through a client that is "
            "not its worker's (another process?): crashtest kills where its worker's own client "
            "sends the completion, and saw none"
        )
    if b.closed in (COMPLETED, FAILED):
        return None
    how = {CANCELLED: "its workflow cancelled it", TIMED_OUT: "it timed out"}.get(
        b.closed, "it was still running when the run ended"
    )
    return f"it never returned in the run without a crash ({how}): no moment after its effect"


def _reachable_after_checkpoint(tree: Tree, b: Boundary) -> str | None:
    """Why `after-checkpoint` at `b` has no moment to crash in, if it has none. An activity's
    is the moment the workflow sees its result (or its failure): one it cancelled, or that was
    still running when the run ended, has none. A local activity's marker is recorded when its
    workflow task completes: the kill needs a later sign of that (an activity scheduled after
    it, or a later workflow task of its run)."""
    if b.closed in (CANCELLED, OPEN):
        return "its workflow never saw it end in the run without a crash (" + (
            "it cancelled it)" if b.closed == CANCELLED else "the run ended while it ran)"
        )
    if not b.local:
        return None
    later = [o for o in tree.boundaries if o.scope == b.scope and o.position > b.position]
    if any(not o.local or o.reset_event_id > b.reset_event_id for o in later):
        return None
    return "the workflow task that records its marker also ends its run: nothing comes between"


OLD, NEW = "old", "new"  # the versions of a deploy test, as `--expect` pins one


@dataclass(frozen=True)
class Reference:
    """The run without a crash: its observed state, its tree of boundaries, and how it ended;
    in a deploy test, `deployed`: the run without a crash of the version deployed."""

    observed: Any
    tree: Tree
    end: str = "completed"
    deployed: Reference | None = None
    pinned: str | None = None  # a deploy test's one version a crashed run must end as
    overran: tuple[str, ...] = ()  # attempts a timeout ended on a live worker (by design)

    def differs(self, end: str, observed: Any) -> str | None:
        """How a crashed run that ended `end` in the state `observed` differs from the run
        without a crash (None: it does not); in a deploy test, from either version's run, or
        from the `pinned` one's (`old` or `new`)."""
        mine = self._differs(end, observed)
        if self.deployed is None:
            return mine
        theirs = self.deployed._differs(end, observed)
        if self.pinned is not None:
            pinned = mine if self.pinned == OLD else theirs
            return None if pinned is None else f"{self.pinned} version (pinned): {pinned}"
        if mine is None or theirs is None:
            return None
        return f"old version: {mine}; new version: {theirs}"

    def _differs(self, end: str, observed: Any) -> str | None:
        if end != self.end:
            return f"the run {end}; without a crash it {self.end}"
        return differences(self.observed, observed)

    @property
    def boundaries(self) -> list[Boundary]:
        return self.tree.boundaries

    def labels(self) -> dict[str, str]:
        """Each boundary's label by its place ("scope:position"), as a kill or a timeline names
        it."""
        return {f"{b.scope}:{b.position}": b.label for b in self.boundaries}

    def every_point(
        self, repeat: int = 1, moments: list[Moment] | None = None
    ) -> tuple[list[CellPoint], list[Untested]]:
        """The points of `moments` (the default set's) at every boundary: effect at each of its
        effects, after-effect at each, after-checkpoint at every one whose completion the run
        goes on from (after the last, when the run without a crash only ended there, a kill
        could repeat nothing: it is listed as not tested, with why)."""
        points, untested = [], []
        for moment in Moment.default_set() if moments is None else moments:
            for b in self.boundaries:
                if moment.kills_at_an_effect:  # one a kill at each effect it said it made
                    effects = range(1, len(b.effects) + 1)
                    points += [CellPoint(moment, b, repeat, k) for k in effects]
                    continue
                if moment.kills_while_waiting:  # only where the run waited: no line elsewhere
                    if (wait := timer_before(self.tree, b)) is not None:
                        points.append(CellPoint(moment, b, wait=wait))
                    continue
                why = self.unreachable(moment, b)
                if why is None and moment.needs_the_result_seen and self._ends_after_last(b):
                    why = "after it the run only ends (it closed in the task that took this result)"
                if why is None:
                    points.append(CellPoint(moment, b, repeat))
                else:
                    untested.append(Untested(f"{moment}:{b.number} ({b.label})", why))
        return points, untested

    def unreachable(self, moment: Moment, b: Boundary) -> str | None:
        """Why `moment` at `b` has no moment to crash in, if it has none."""
        if moment.needs_a_return and (why := _reachable_after_effect(b)) is not None:
            return why
        if moment.needs_the_result_seen:
            return _reachable_after_checkpoint(self.tree, b)
        if moment.kills_while_waiting and timer_before(self.tree, b) is None:
            return (
                "no timer of 1 s or longer fired before it was scheduled, with nothing in flight, "
                "in the run without a crash (a workflow.sleep, a wait_condition's timeout)"
            )
        return None

    def _ends_after_last(self, b: Boundary) -> bool:
        return b is self.boundaries[-1] and self._only_ends_after(b)

    def _only_ends_after(self, b: Boundary) -> bool:
        """After `b` the run only ended — and will in every run: a boundary that ran beside
        others (scheduled in the same workflow task) may be the last to finish in one run and
        not in another, so its point is always made."""
        return not self.siblings(b) and self.tree.only_ends_after(b)

    def siblings(self, b: Boundary) -> list[Boundary]:
        """The boundaries that ran beside `b`: scheduled in the same workflow task of its run."""
        return [
            o
            for o in self.boundaries
            if o is not b and o.scope == b.scope and o.reset_event_id == b.reset_event_id
        ]

    def resolve(self, text: str, repeat: int = 1) -> CellPoint:
        """A crash point as the user wrote it: by position, by label, or by activity type."""
        point = CrashPoint.parse(text)
        found: Boundary | None = None
        if point.position is not None:
            if not 1 <= point.position <= len(self.boundaries):
                raise CrashPointError(
                    f"{text}: this workflow has boundaries 1..{len(self.boundaries)}"
                )
            found = self.boundaries[point.position - 1]
        else:
            found = next((b for b in self.boundaries if b.label == point.text), None) or next(
                (
                    b
                    for b in self.boundaries
                    if b.activity == point.activity and b.occurrence == point.occurrence
                ),
                None,
            )
        if found is None:
            known = ", ".join(dict.fromkeys(b.activity for b in self.boundaries))
            raise CrashPointError(
                f"unknown crash point {text!r}: no boundary is named {point.text!r}; "
                f"its activities: {known} (or a position 1..{len(self.boundaries)})"
            )
        if point.moment.kills_while_waiting and not in_the_root_chain(found.scope):
            raise CrashPointError(
                f"{text}: {found.label} is in a child workflow, which its parent's run waits on "
                "with the child in flight; crashtest kills a worker while a run of the root's "
                "chain waits"
            )
        if not point.moment.kills_a_worker and not in_the_root_chain(found.scope):
            raise CrashPointError(
                f"{text}: {found.label} is in a child workflow; an operator resets the root "
                "workflow (reset a boundary of the root, before the child was started)"
            )
        if (why := self.unreachable(point.moment, found)) is not None:
            raise CrashPointError(f"{text} ({found.label}): {why}")
        if point.effect > len(found.effects):
            said = f" ({', '.join(found.effects)})" if found.effects else ""
            raise CrashPointError(
                f"{text} ({found.label}): it made {len(found.effects)} effect(s){said} in the run "
                "without a crash (its committed database writes, its answered requests with "
                "--http, and those it marks with temporal_crashtest.effect)"
            )
        if point.moment.kills_while_waiting:
            return CellPoint(point.moment, found, wait=timer_before(self.tree, found))
        repeats = point.repeat if point.repeat > 1 else repeat
        return CellPoint(point.moment, found, repeats, point.effect)

    def select(
        self, points: list[str] | None, repeat: int = 1
    ) -> tuple[list[CellPoint], list[Untested]]:
        """The crash points named, or all of them; and what is left untested."""
        if points is None:
            chosen, untested = self.every_point(repeat)
            return chosen, [*self.tree.untested, *untested]
        whole = [p.moment for p in map(CrashPoint.parse, points) if p.every_boundary]
        chosen, untested = self.every_point(repeat, whole) if whole else ([], [])
        named = [p for p in points if not CrashPoint.parse(p).every_boundary]
        chosen = list(dict.fromkeys([*chosen, *(self.resolve(p, repeat) for p in named)]))
        crashed = {c.boundary.number for c in chosen}
        untested += [
            Untested(b.label, "not among the crash points asked for (--points)")
            for b in self.boundaries
            if b.number not in crashed
        ]
        return chosen, [*self.tree.untested, *untested]
