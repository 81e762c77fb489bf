"""Crash points: where a process SIGKILLs itself, and how they are written.

`after-effect:N`      activity (or local activity, or step) N did its work and returned; the
                      server has not heard.
`after-checkpoint:N`  the server recorded N as done; killed before anything after it is recorded.
`reset:N`             crashtest only: a completed run is reset to the workflow task before N was
                      scheduled (as an operator does), and finishes again.

N is a position in scheduling order, 1-based, or an activity type name as the history spells it
(`after-effect:charge` is the first `charge`, `after-effect:charge#2` the second), or the label
crashtest prints for a boundary (`run 2: notify`, `ChargeChild/charge`). A `*K` suffix
(`after-effect:3*2`) crashes the worker that takes over at the same point too, K crashes in all.
Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from temporal_crashtest._errors import CrashPointError


class Moment(StrEnum):
    AFTER_EFFECT = "after-effect"
    AFTER_CHECKPOINT = "after-checkpoint"
    RESET = "reset"


_POSITION = re.compile(r"^\d+$")
_NAMED = re.compile(r"^(?P<name>.+?)(?:#(?P<occurrence>\d+))?$")
_REPEAT = re.compile(r"^(?P<target>.*?)\*(?P<repeat>\d+)$")
SYNTAX = (
    "after-effect:N, after-checkpoint:N or reset:N, N a position (1, 2, ...), an activity name "
    "or a boundary's label, with *K to crash K times"
)
MAX_REPEAT = 5


@dataclass(frozen=True)
class CrashPoint:
    """A crash point as the user writes it: `after-effect:N`, `after-checkpoint:N` or `reset:N`,
    N a position in scheduling order or an activity type (`name#k`), optionally in a child or a
    later run (`Child/name`, `run 2: name`), and `*R` to crash R workers in a row. The runner
    resolves it against the reference run's boundaries (CellPoint)."""

    moment: Moment
    position: int | None = None  # 1-based, in scheduling order ...
    activity: str | None = None  # ... or an activity type name
    occurrence: int = 1  # which run of that activity type (name#2)
    repeat: int = 1  # crashes at this point: the first worker's, then its successors'
    text: str = field(default="", compare=False)  # as written (matched against labels)

    def __str__(self) -> str:
        if self.position is not None:
            target = str(self.position)
        else:
            target = (
                f"{self.activity}#{self.occurrence}"
                if self.occurrence != 1
                else (self.activity or "")
            )
        return f"{self.moment.value}:{target}" + (f"*{self.repeat}" if self.repeat > 1 else "")

    @classmethod
    def parse(cls, text: str) -> CrashPoint:
        moment_text, colon, target = text.strip().partition(":")
        target = target.strip()
        if moment_text not in {m.value for m in Moment} or not colon or not target:
            raise CrashPointError(f"unknown crash point {text!r}; expected {SYNTAX}")
        moment = Moment(moment_text)
        repeat = 1
        if (suffix := _REPEAT.match(target)) is not None:
            target, repeat = suffix["target"].strip(), int(suffix["repeat"])
            if not 1 <= repeat <= MAX_REPEAT:
                raise CrashPointError(
                    f"unknown crash point {text!r}: *K crashes 1 to {MAX_REPEAT} times"
                )
            if moment is Moment.RESET and repeat > 1:
                raise CrashPointError(f"unknown crash point {text!r}: a reset is not repeated")
        if _POSITION.match(target):
            if int(target) < 1:
                raise CrashPointError(f"unknown crash point {text!r}: positions start at 1")
            return cls(moment, position=int(target), repeat=repeat, text=target)
        named = _NAMED.match(target)
        if named is None:
            raise CrashPointError(f"unknown crash point {text!r}; expected {SYNTAX}")
        occurrence = int(named["occurrence"] or 1)
        if occurrence < 1:
            raise CrashPointError(f"unknown crash point {text!r}: occurrences start at #1")
        return cls(
            moment, activity=named["name"], occurrence=occurrence, repeat=repeat, text=target
        )
