"""The journal's crash points (`CRASH_AT`): where `step()` SIGKILLs its own process.

`after-effect:N`      step N did its work; its checkpoint is not yet saved.
`after-checkpoint:N`  step N's checkpoint is saved; nothing after it is.

N is a step's number, 1-based, or its name: `after-effect:place_order`, `after-effect:charge#2`
for the second of a name. (crashtest, which crashes Temporal workers, has its own, richer points.)
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from infra.config import env_str
from infra.errors import ConfigError


class Moment(StrEnum):
    AFTER_EFFECT = "after-effect"
    AFTER_CHECKPOINT = "after-checkpoint"


class CrashPointError(ValueError):
    """A crash point that is not written right, or names no boundary of the workflow."""


_TARGET = re.compile(r"^(?:(?P<position>\d+)|(?P<name>[A-Za-z_][\w.-]*)(?:#(?P<occurrence>\d+))?)$")
SYNTAX = "after-effect:N or after-checkpoint:N, N a position (1, 2, ...) or an activity name"


@dataclass(frozen=True)
class CrashPoint:
    """Where the journal's `step()` SIGKILLs its process: `after-effect:N` (step N's work done,
    not yet saved) or `after-checkpoint:N` (saved, nothing after it); N a step number or name."""

    moment: Moment
    position: int | None = None  # 1-based, in scheduling order ...
    activity: str | None = None  # ... or an activity type name
    occurrence: int = 1  # which run of that activity type (name#2)

    def __str__(self) -> str:
        if self.position is not None:
            return f"{self.moment.value}:{self.position}"
        suffix = f"#{self.occurrence}" if self.occurrence != 1 else ""
        return f"{self.moment.value}:{self.activity}{suffix}"

    @classmethod
    def parse(cls, text: str) -> CrashPoint:
        moment_text, _, target = text.strip().partition(":")
        match = _TARGET.match(target)
        if moment_text not in {m.value for m in Moment} or match is None:
            raise CrashPointError(f"unknown crash point {text!r}; expected {SYNTAX}")
        if match["position"] is not None:
            if int(match["position"]) < 1:
                raise CrashPointError(f"unknown crash point {text!r}: positions start at 1")
            return cls(Moment(moment_text), position=int(match["position"]))
        occurrence = int(match["occurrence"] or 1)
        if occurrence < 1:
            raise CrashPointError(f"unknown crash point {text!r}: occurrences start at #1")
        return cls(Moment(moment_text), activity=match["name"], occurrence=occurrence)

    def matches(self, position: int, activity: str, occurrence: int) -> bool:
        """Whether this point names the activity at `position` (the `occurrence`-th `activity`)."""
        if self.position is not None:
            return self.position == position
        return self.activity == activity and self.occurrence == occurrence

    def resolve(
        self, activities: Sequence[str], *, checkpoint_after_last: bool = False
    ) -> CrashPoint:
        """The same point by position, checked against the activity types in scheduling order.

        `checkpoint_after_last`: whether `after-checkpoint` may name the last activity (a journal
        records it; a Temporal worker has no next activity to crash in)."""
        last = len(activities) if checkpoint_after_last else len(activities) - 1
        if self.position is not None:
            position = self.position
        else:
            runs = [i for i, name in enumerate(activities, 1) if name == self.activity]
            if len(runs) < self.occurrence:
                known = ", ".join(dict.fromkeys(activities))
                how_often = f"runs {len(runs)} time(s)" if runs else "is not an activity"
                raise CrashPointError(
                    f"unknown crash point {str(self)!r}: {self.activity!r} {how_often} in this "
                    f"workflow; its activities: {known}"
                )
            position = runs[self.occurrence - 1]
        if self.moment is Moment.AFTER_EFFECT and not 1 <= position <= len(activities):
            raise CrashPointError(
                f"unknown crash point {str(self)!r}; valid: {valid_points(activities, last)}"
            )
        if self.moment is Moment.AFTER_CHECKPOINT and not 1 <= position <= last:
            if position == len(activities) and last == len(activities) - 1:
                raise CrashPointError(f"{self} has no next activity to crash in; use 1..{last}")
            raise CrashPointError(
                f"unknown crash point {str(self)!r}; valid: {valid_points(activities, last)}"
            )
        return CrashPoint(self.moment, position=position)


def valid_points(activities: Sequence[str], last_checkpoint: int) -> str:
    effect = f"{Moment.AFTER_EFFECT.value}:1..{len(activities)}"
    if last_checkpoint < 1:
        return f"{effect} (or an activity name)"
    return f"{effect}, {Moment.AFTER_CHECKPOINT.value}:1..{last_checkpoint} (or an activity name)"


def parse_and_resolve(
    text: str, activities: Sequence[str], *, checkpoint_after_last: bool = False
) -> CrashPoint:
    return CrashPoint.parse(text).resolve(activities, checkpoint_after_last=checkpoint_after_last)


CRASH_AT = "CRASH_AT"


def without_crash_at(env: Mapping[str, str]) -> dict[str, str]:
    """An environment for processes started by the lab or a bench: a CRASH_AT of the caller's
    must not reach a journal process that is meant to resume, not crash."""
    return {k: v for k, v in env.items() if k != CRASH_AT}


def crash_point_from_env(steps: Sequence[str]) -> CrashPoint | None:
    """CRASH_AT (unset: never crash), resolved to a position among `steps` (the journal records
    its last step too, so it may crash after it)."""
    raw = env_str(CRASH_AT)
    if raw is None:
        return None
    try:
        return parse_and_resolve(raw, steps, checkpoint_after_last=True)
    except CrashPointError as err:
        raise ConfigError(str(err)) from None


def crash_now(point: CrashPoint, where: str = "") -> None:
    """SIGKILL this process: no cleanup, no finally blocks, no atexit. A real crash."""
    detail = f" ({where})" if where else ""
    print(f"CRASH {point}{detail}: SIGKILL pid {os.getpid()}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
