"""The crash test's data model: what is crash-tested (`Target`), where one cell crashes
(`CellPoint`), and the run without a crash every cell is compared with (`Reference`: its observed
state and the tree of boundaries its histories list)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from temporalio.client import WorkflowHandle

from temporal_crashtest._errors import CrashPointError, CrashTestAborted
from temporal_crashtest._history import (
    CANCELLED,
    COMPLETED,
    FAILED,
    LATER_UNSEEN,
    OPEN,
    TIMED_OUT,
    Boundary,
    Tree,
)
from temporal_crashtest._interceptor import CrashSite
from temporal_crashtest._points import CrashPoint, Moment, effect_label
from temporal_crashtest._report import Untested, differences
from temporal_crashtest._text import finite, shown

Observe = Callable[[str], Any]
"""`observe(workflow_id) -> JSON-able`: your view of a run's final state (sync or async)."""
Drive = Callable[[WorkflowHandle[Any, Any]], Any]
"""`drive(handle)`: sends the signals and updates a run waits for (sync or async)."""
CRASHTEST_WORKER = "temporal_crashtest.worker"  # the module of crashtest's Python worker


@dataclass(kw_only=True, frozen=True)
class Target:
    """What is crash-tested: how to build its worker, which workflow, with what input.

    Args:
        worker: `MODULE:FACTORY`; `FACTORY(client, task_queue)` returns the Worker (or several,
            one per task queue its process serves), built on the client it is given.
        workflow: the workflow type name (the CLI also takes `MODULE:CLASS`).
        input: the workflow's one argument, as JSON.
        data_converter: `MODULE:NAME` of a temporalio DataConverter, for every client.
        plugins: `MODULE:NAME` of temporalio client plugins (an agent framework's).
        env: more environment for the worker processes.
        resume_after_s: wait this long after a kill (or before a reset) before the run resumes,
            e.g. past an idempotency key's TTL.
        deploy_to: `MODULE:FACTORY` of the next version's worker: every run starts on `worker`,
            and the worker that takes a run over after a kill runs this one (a deploy). The
            workflow type names must be the same.
        worker_tree: the source tree `worker` is imported from (the working directory of its
            processes and first on their import path): a checkout of another version, e.g. a
            `git worktree` of the base branch; None: this process's working directory.
        deploy_tree: the same for `deploy_to`.
        worker_cmd: the worker as a command of any language (`node lib/worker.js`), in place of
            `worker`: it reads the server's address, namespace and task queue from the
            environment, and is killed on the wire, through a proxy (`_wire`).
        deploy_cmd: the next version's worker command, in place of `deploy_to` (run in
            `deploy_tree` if given).
    """

    worker: str  # MODULE:FACTORY, FACTORY(client, task_queue) -> Worker
    workflow: str  # the workflow type name
    input: Any  # the workflow's one argument, as JSON
    data_converter: str | None = None  # MODULE:NAME, for the worker processes' clients
    plugins: tuple[str, ...] = ()  # MODULE:NAME of client plugins, for every client
    env: dict[str, str] = field(default_factory=dict)  # more environment for the workers
    resume_after_s: float = 0.0  # wait this long after a kill (or before a reset) to resume
    deploy_to: str | None = None  # MODULE:FACTORY of the version that takes over after a kill
    worker_tree: str | None = None  # the source tree `worker` is imported from (None: here)
    deploy_tree: str | None = None  # the source tree `deploy_to` is imported from
    worker_cmd: tuple[str, ...] = ()  # the worker as a command, in place of `worker`
    deploy_cmd: tuple[str, ...] = ()  # the next version's worker command, in place of deploy_to

    @property
    def old(self) -> Version:
        """The version every run starts on."""
        return Version(self.worker, self.worker_tree, self.worker_cmd)

    @property
    def deploy(self) -> Deploy | None:
        """A deploy test's two versions (None: not a deploy test)."""
        if self.deploy_to is None and not self.deploy_cmd:
            return None
        return Deploy(self.old, Version(self.deploy_to or "", self.deploy_tree, self.deploy_cmd))

    def version(self, deployed: bool) -> Version:
        """The old version, or (`deployed`, in a deploy test) the new one."""
        deploy = self.deploy
        return deploy.new if deployed and deploy is not None else self.old

    def alone(self, version: Version) -> Target:
        """`version` tested alone (e.g. the new version's run without a crash)."""
        return replace(
            self,
            worker=version.factory,
            worker_tree=version.tree,
            worker_cmd=version.command,
            deploy_to=None,
            deploy_tree=None,
            deploy_cmd=(),
        )


@dataclass(frozen=True)
class Version:
    """One version of the workers: its factory and the source tree it is imported from (None:
    this process's working directory); or the command that runs it, in any language
    (`command`: its workers are killed on the wire, `_wire`)."""

    factory: str  # MODULE:FACTORY
    tree: str | None = None
    command: tuple[str, ...] = ()  # a worker of any SDK, run as this command (in `tree`)

    @property
    def on_the_wire(self) -> bool:
        """Its workers are commands, killed on the wire: their activities carry no stamp, their
        runs are numbered from the history alone (`RunHistory.stamped`)."""
        return bool(self.command)

    @property
    def crashtest_worker(self) -> list[str] | None:
        """A command that runs crashtest's own Python worker in this interpreter (`python -m
        temporal_crashtest.worker ARGS`, `python` this process's): ARGS. Its workers are forked
        from a fork server, built, as a factory's are, and killed on the wire all the same.
        None: any other command."""
        found = shutil.which(self.command[0]) if self.command else None
        if found is None or os.path.abspath(found) != os.path.abspath(sys.executable):
            return None
        if list(self.command[1:3]) != ["-m", CRASHTEST_WORKER]:
            return None
        return list(self.command[3:])

    @property
    def forked_factory(self) -> str | None:
        """The factory a fork server imports for its workers (None: they are started as
        commands)."""
        if not self.command:
            return self.factory
        args = self.crashtest_worker or []
        return next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--worker"), None)

    def __str__(self) -> str:
        what = shlex.join(self.command) if self.command else self.factory
        return what if self.tree is None else f"{what} from {self.tree}"


@dataclass(frozen=True)
class Deploy:
    """A deploy test: every run starts on `old`; the worker that takes a run over after a kill
    (or runs a reset run) is `new`'s."""

    old: Version
    new: Version


@dataclass(frozen=True)
class CellPoint:
    """One cell's crash: a moment at a boundary, `repeat` times (a reset: once)."""

    moment: Moment
    boundary: Boundary
    repeat: int = 1
    effect: int = 0  # at an effect: the boundary's K-th (`effect:N.K`)

    @property
    def crash_at(self) -> str:
        effect = f".{self.effect}" if self.effect else ""
        return f"{self.moment.value}:{self.boundary.number}{effect}" + (
            f"*{self.repeat}" if self.repeat > 1 else ""
        )

    @property
    def label(self) -> str:
        """The boundary's label; at an effect, with the effect's name."""
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
        if not point.moment.kills_a_worker and "/" in found.scope:
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


def to_json(value: object, what: str) -> Any:
    """A JSON round trip, so that tuples and lists compare equal and the report can hold it; a
    NaN or an infinity becomes the string Python writes for it (it then equals itself, and any
    JSON parser reads the report)."""
    try:
        return finite(json.loads(json.dumps(value, sort_keys=True)))
    except (TypeError, ValueError, RecursionError) as err:
        raise CrashTestAborted(
            f"{what} returned something that is not JSON: {shown(err)}"
        ) from None
