"""What travels with a crash point into a worker: the site a worker is told to die at
(`CrashSite`, as JSON on its command line), the place an activity carries in its headers while
it runs (`Stamp`), the scope a run's start carries (`Scope`), and the payloads that hold them.
Standard library and temporalio's payloads only."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from temporalio.api.common.v1 import Payload

from temporal_crashtest._errors import CrashPointError
from temporal_crashtest._points.points import CrashPoint, Moment

STAMP_HEADER = "crashtest-boundary"


SCOPE_HEADER = "crashtest-scope"


ROOT_SCOPE = "@1"


WORKER_KILLED = "CrashtestWorkerKilled"  # the failure type of an attempt a fast-forward ended


@dataclass(kw_only=True, frozen=True)
class Stamp:
    root: str  # the workflow id at the root of the run's tree
    scope: str  # the run's place in the tree and its chain
    position: int  # 1-based, activities and local activities in scheduling order
    activity: str  # the activity type
    local: bool
    kill_on_start: bool = False  # scheduled after an armed local activity's marker (see above)
    occurrence: int = 1  # which `activity` of its run it is

    def label(self) -> str:
        where = "" if self.scope == ROOT_SCOPE else f"{self.scope} "
        return f"{where}activity {self.position} ({self.activity}{' local' if self.local else ''})"


@dataclass(kw_only=True, frozen=True)
class CrashSite:
    """A boundary to crash at: position `position` of the run `scope`, or (`activity` given)
    the `occurrence`-th activity of that type in it."""

    moment: Moment  # one that kills a worker (`Moment.kills_a_worker`)
    scope: str
    position: int = 0
    activity: str | None = None
    occurrence: int = 1
    effect: int = 0  # at an effect (`Moment.kills_at_an_effect`): the boundary's K-th
    # As its run's history names it (a kill on the wire finds the boundary by these alone; the
    # same boundary, however found):
    activity_id: str = field(default="", compare=False)
    local: bool = field(default=False, compare=False)
    # The activity type the run without a crash had there: a run that went another way has
    # another activity at the same place, and is not killed there ("": any).
    activity_type: str = field(default="", compare=False)

    def to_text(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def parse(cls, text: str) -> CrashSite:
        """JSON from `to_text`, or a crash point by position or activity type (in the root's
        first run: a worker on its own has no history to read labels from)."""
        if text.lstrip().startswith("{"):
            try:
                data = json.loads(text)
                return cls(**{**data, "moment": Moment(data["moment"])})
            except (ValueError, KeyError, TypeError) as err:
                raise CrashPointError(f"not a crash site: {text!r} ({err})") from None
        return cls.of(CrashPoint.parse(text))

    @classmethod
    def of(cls, point: CrashPoint) -> CrashSite:
        if not point.moment.kills_a_worker or point.repeat > 1 or point.every_boundary:
            moments = ", ".join(m.form for m in Moment if m.kills_a_worker)
            raise CrashPointError(f"{point}: one worker crashes itself once, at {moments}")
        if point.position is None:
            return cls(
                moment=point.moment,
                scope=ROOT_SCOPE,
                activity=point.activity,
                occurrence=point.occurrence,
                effect=point.effect,
            )
        return cls(
            moment=point.moment, scope=ROOT_SCOPE, position=point.position, effect=point.effect
        )

    def names(self, stamp: Stamp) -> bool:
        """Whether this site is the boundary `stamp`."""
        if self.scope != stamp.scope or self.activity_type not in ("", stamp.activity):
            return False
        if self.activity is not None:
            return (self.activity, self.occurrence) == (stamp.activity, stamp.occurrence)
        return self.position == stamp.position

    def __str__(self) -> str:
        point = str(
            CrashPoint(
                moment=self.moment,
                position=None if self.activity is not None else self.position,
                activity=self.activity,
                occurrence=self.occurrence,
                effect=self.effect,
            )
        )
        if self.scope == ROOT_SCOPE:
            return point
        moment, _, target = point.partition(":")
        return f"{moment}:{self.scope}:{target}"


def encode(data: dict[str, Any]) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(data).encode())


def decode_stamp(payload: Payload | None) -> Stamp | None:
    if payload is None:
        return None
    try:
        return Stamp(**json.loads(payload.data))
    except (ValueError, TypeError):
        return None


@dataclass(frozen=True)
class Scope:
    """What a run's start header carries: its tree's root, and its place in the tree."""

    root: str
    scope: str


def decode_scope(payload: Payload | None) -> Scope | None:
    if payload is None:
        return None
    try:
        data = json.loads(payload.data)
        return Scope(str(data["root"]), str(data["scope"]))
    except (ValueError, TypeError, KeyError):
        return None


def in_the_root_chain(scope: str) -> bool:
    """Whether `scope` is a run of the root's chain (its first run, or one it continued as), not
    of a child's."""
    return "/" not in scope


def next_run(scope: str) -> str:
    head, _, run = scope.rpartition("@")
    return f"{head}@{int(run) + 1}"
