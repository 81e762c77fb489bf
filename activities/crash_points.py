"""Crash points: where a process SIGKILLs itself to prove that a resumed run ends right.

`after-effect:N`      step N's work is done (its effect committed) and not yet recorded as done.
`after-checkpoint:N`  step N is recorded as done and step N+1 has not begun.
"""

from __future__ import annotations

import os
import signal
import sys
from enum import StrEnum

from pydantic import BaseModel

from store.config import env_str
from store.errors import ConfigError

STEP_COUNT = 6


class Moment(StrEnum):
    AFTER_EFFECT = "after-effect"
    AFTER_CHECKPOINT = "after-checkpoint"


VALID_CRASH_POINTS = [f"{m.value}:{n}" for m in Moment for n in range(1, STEP_COUNT + 1)]


class CrashPoint(BaseModel, frozen=True):
    moment: Moment
    step: int

    def __str__(self) -> str:
        return f"{self.moment.value}:{self.step}"

    @classmethod
    def parse(cls, text: str) -> CrashPoint:
        if text.strip() not in VALID_CRASH_POINTS:
            raise ConfigError(
                f"unknown crash point {text!r}; valid points: {', '.join(VALID_CRASH_POINTS)}"
            )
        moment, step = text.strip().split(":")
        return cls(moment=Moment(moment), step=int(step))

    def is_at(self, moment: Moment, step: int) -> bool:
        return self.moment == moment and self.step == step


def crash_point_from_env() -> CrashPoint | None:
    """CRASH_AT from the environment; unset means never crash."""
    raw = env_str("CRASH_AT")
    return CrashPoint.parse(raw) if raw else None


def crash_now(point: CrashPoint) -> None:
    """SIGKILL this process: no cleanup, no finally blocks, no atexit. A real crash."""
    print(f"CRASH {point}: SIGKILL pid {os.getpid()}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def crash_if(point: CrashPoint | None, moment: Moment, step: int) -> None:
    if point is not None and point.is_at(moment, step):
        crash_now(point)
