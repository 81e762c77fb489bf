"""The journal's own crash points (`CRASH_AT`): where its `step()` SIGKILLs its own process.

    after-effect:N       step N did its work (its model call, its order, its email); its
                         checkpoint is not saved yet: the crash window every design is about
    after-checkpoint:N   step N's checkpoint is saved; nothing after it is

N is a step's number (1-6) or its name (`after-effect:place_order`). The journal saves its last
step too, so `after-checkpoint:6` is a point as well. These are the journal's alone: the crash
tool has points of its own, for Temporal workers, and never reads these.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from infra.config import env_str
from infra.errors import ConfigError

CRASH_AT = "CRASH_AT"


class StepMoment(StrEnum):
    """When in a step the journal's process is killed."""

    AFTER_EFFECT = "after-effect"
    AFTER_CHECKPOINT = "after-checkpoint"


@dataclass(frozen=True)
class StepCrashPoint:
    """A moment of one step (by number) of the journal's run."""

    moment: StepMoment
    step: int

    def __str__(self) -> str:
        return f"{self.moment.value}:{self.step}"

    @classmethod
    def parse(cls, text: str, steps: Sequence[str]) -> StepCrashPoint:
        """`after-effect:N` or `after-checkpoint:N`, N a number 1..len(steps) or one of `steps`;
        ConfigError (one line naming what is valid) otherwise."""
        moment, _, which = text.strip().partition(":")
        valid = (
            f"after-effect:N or after-checkpoint:N, N one of 1..{len(steps)} or a step "
            f"({', '.join(steps)})"
        )
        if moment not in {m.value for m in StepMoment}:
            raise ConfigError(f"unknown crash point {text!r}; expected {valid}")
        if which.isascii() and which.isdigit() and 1 <= int(which) <= len(steps):
            return cls(StepMoment(moment), int(which))
        if which in steps:
            return cls(StepMoment(moment), steps.index(which) + 1)
        raise ConfigError(f"unknown crash point {text!r}; expected {valid}")


def without_crash_at(env: Mapping[str, str]) -> dict[str, str]:
    """An environment for processes started by the lab or a bench: a CRASH_AT of the caller's
    must not reach a journal process that is meant to resume, not crash."""
    return {k: v for k, v in env.items() if k != CRASH_AT}


def crash_point_from_env(steps: Sequence[str]) -> StepCrashPoint | None:
    """CRASH_AT (unset: never crash), as a step number among `steps`."""
    raw = env_str(CRASH_AT)
    return None if raw is None else StepCrashPoint.parse(raw, steps)


def crash_now(point: StepCrashPoint) -> None:
    """SIGKILL this process: no cleanup, no finally blocks, no atexit. A real crash."""
    print(f"CRASH {point}: SIGKILL pid {os.getpid()}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
