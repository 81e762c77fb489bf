"""Crash points: where a process SIGKILLs itself, and how they are written.

`effect:N.K`          inside activity N: its K-th effect was made and answered, and its next
                      line never ran (`effect:N` is its first). The effects a worker sees
                      are its committed database writes (`_commits`), with `--http` its
                      answered requests, and those it marks (`temporal_crashtest.effect`);
                      every one the run without a crash made is a point of the default set.
`after-effect:N`      activity (or local activity, or step) N did its work and returned; the
                      server has not heard.
`after-checkpoint:N`  the server recorded N as done; killed before anything after it is recorded.
`in-task:N`           the workflow task that schedules N ran its workflow code; killed before
                      its commands reached the server (N is not scheduled; the task runs again).
                      Not in the default set: name it with `--points`.
`wait:N`              the run waits on a timer before N is scheduled (a `workflow.sleep`, a
                      `wait_condition` timeout), nothing in flight: its worker is killed there,
                      and the next one takes the run when the timer fires (crashtest kills it).
`reset:N`             crashtest only: a completed run is reset to the workflow task before N was
                      scheduled (as an operator does), and finishes again.

N is a position in scheduling order, 1-based, or an activity type name as the history spells it
(`after-effect:charge` is the first `charge`, `after-effect:charge#2` the second), or the label
crashtest prints for a boundary (`run 2: notify`, `ChargeChild/charge`). A `*R` suffix
(`after-effect:3*2`) crashes the worker that takes over at the same point too, R crashes in all.
A moment alone (`after-effect`) is its point at every boundary, as the default set makes them.
Standard library only.

What a moment means is answered here, by `Moment`, and nowhere else: whether a worker kills
itself at it (and so may share a run with other kills, and be repeated), whether the kill holds
a workflow task, whether the default set makes it, what an attempt or the workflow must have done
for it to be reachable, and what the worker has done when it dies.

Five records name a place to crash, each at one stage of a crash test:

- `CrashPoint` (here): a point as the user writes it, before the workflow has run — a moment and
  a target (a position, an activity type, a label), repeated K times.
- `Boundary` (`_history`): one activity or local activity of the run without a crash, as its
  history shows it — where it sits in the tree of runs and children, and when it ended.
- `CellPoint` (`_model`): a crash point resolved against the reference run — a moment at one
  boundary, K times. One cell of the table.
- `CrashSite` (`_interceptor`): what a worker process is told — the moment and the boundary's
  place (scope and position), without the history: it travels on the command line as JSON.
- `Stamp` (`_interceptor`): the place an activity carries in its headers while it runs, so the
  worker can tell whether it is the one its `CrashSite` names.

To add a moment: a member and its `_MEANINGS` row below (the rest of the code asks the row); the
kill itself in `_interceptor` (where a worker can see the moment come); for one a worker does not
reach by itself, as `reset`, the runner's step that makes it (`Runner.cell`); and a shape that
shows it (`examples/shapes`) with its keyed and unkeyed verdicts in `tests/test_crashtest_shapes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from temporal_crashtest._errors import CrashPointError


@dataclass(kw_only=True, frozen=True)
class _Meaning:
    kills_a_worker: bool  # a worker SIGKILLs itself there (False: crashtest acts on the run)
    kills_in_the_workflow: bool  # the kill comes while the worker holds a workflow task
    in_default_set: bool  # every boundary gets one, unless asked otherwise
    needs_a_return: bool  # reachable only where an attempt returned in the run without a crash
    needs_the_result_seen: bool  # ... only where the workflow saw the activity end
    kills_as_scheduled: bool  # the workflow code scheduling it is the moment (not its result)
    kills_at_an_effect: bool = False  # inside the activity, after one of its effects
    recorded_at_the_kill: bool = False  # what the worker dies sending reaches the server
    kills_while_waiting: bool = False  # crashtest kills the worker while the run waits on a timer
    dies: str  # what the worker (or the run) has done at that moment


class Moment(StrEnum):
    """When, around one boundary, a crash comes; its properties are what the code asks of it."""

    EFFECT = "effect"
    AFTER_EFFECT = "after-effect"
    AFTER_CHECKPOINT = "after-checkpoint"
    IN_TASK = "in-task"
    WAIT = "wait"
    RESET = "reset"

    @property
    def _meaning(self) -> _Meaning:
        return _MEANINGS[self]

    @property
    def kills_a_worker(self) -> bool:
        """A worker kills itself at it: it may share a run with other kills, and be repeated
        (`*K`); otherwise crashtest acts on a run that ended (a reset), once, in a run of its
        own."""
        return self._meaning.kills_a_worker

    @property
    def kills_in_the_workflow(self) -> bool:
        """The kill comes in workflow code, holding a workflow task (its retry waits out the
        short task timeout); otherwise in the activity, after it returned."""
        return self._meaning.kills_in_the_workflow

    @property
    def kills_in_the_activity(self) -> bool:
        """The kill comes in the activity's worker, once its attempt returned."""
        return (
            self.kills_a_worker and not self.kills_in_the_workflow and not self.kills_at_an_effect
        )

    @property
    def kills_at_an_effect(self) -> bool:
        """The kill comes inside the activity, right after one of its effects (`N.K`: the K-th
        effect of boundary N), before its next line runs."""
        return self._meaning.kills_at_an_effect

    @property
    def in_default_set(self) -> bool:
        """Every boundary gets a point at this moment when the user names none."""
        return self._meaning.in_default_set

    @property
    def needs_a_return(self) -> bool:
        """Reachable only at a boundary whose attempt returned in the run without a crash."""
        return self._meaning.needs_a_return

    @property
    def needs_the_result_seen(self) -> bool:
        """Reachable only at a boundary whose end the workflow saw in the run without a crash."""
        return self._meaning.needs_the_result_seen

    @property
    def kills_as_scheduled(self) -> bool:
        """The kill comes in the workflow task that schedules the boundary, once its workflow
        code ran that far; otherwise (in the workflow) when the workflow sees its result."""
        return self._meaning.kills_as_scheduled

    @property
    def recorded_at_the_kill(self) -> bool:
        """What the worker was sending when it died reaches the server (after a checkpoint: the
        workflow task that recorded the activity's result); otherwise it is lost with it."""
        return self._meaning.recorded_at_the_kill

    @property
    def kills_while_waiting(self) -> bool:
        """crashtest kills the worker (it does not kill itself) while the run waits on a timer
        before the boundary, nothing in flight: reachable only where one fired there in the run
        without a crash; a run of its own, once."""
        return self._meaning.kills_while_waiting

    @property
    def dies(self) -> str:
        """What has happened when the crash comes, in words."""
        return self._meaning.dies

    @property
    def form(self) -> str:
        """How a point at this moment is written: `MOMENT:N` (`effect:N.K`)."""
        return f"{self}:N.K" if self.kills_at_an_effect else f"{self}:N"

    @classmethod
    def default_set(cls) -> list[Moment]:
        return [m for m in cls if m.in_default_set]


_MEANINGS = {
    Moment.AFTER_EFFECT: _Meaning(
        kills_a_worker=True,
        kills_in_the_workflow=False,
        in_default_set=True,
        needs_a_return=True,
        needs_the_result_seen=False,
        kills_as_scheduled=False,
        dies="the activity did its work and returned, unheard by the server",
    ),
    Moment.EFFECT: _Meaning(
        kills_a_worker=True,
        kills_in_the_workflow=False,
        in_default_set=True,
        needs_a_return=False,
        needs_the_result_seen=False,
        kills_as_scheduled=False,
        kills_at_an_effect=True,
        dies="the activity made an effect and was answered; its next line never ran",
    ),
    Moment.AFTER_CHECKPOINT: _Meaning(
        kills_a_worker=True,
        kills_in_the_workflow=True,
        in_default_set=True,
        needs_a_return=False,
        needs_the_result_seen=True,
        kills_as_scheduled=False,
        recorded_at_the_kill=True,
        dies="the server recorded the activity done, and nothing after it",
    ),
    Moment.IN_TASK: _Meaning(
        kills_a_worker=True,
        kills_in_the_workflow=True,
        in_default_set=False,
        needs_a_return=False,
        needs_the_result_seen=False,
        kills_as_scheduled=True,
        dies="the workflow code that schedules the activity ran; its task's commands never "
        "reached the server",
    ),
    Moment.WAIT: _Meaning(
        kills_a_worker=False,
        kills_in_the_workflow=False,
        in_default_set=True,
        needs_a_return=False,
        needs_the_result_seen=False,
        kills_as_scheduled=False,
        kills_while_waiting=True,
        dies="the run waited on a timer before the activity, nothing in flight; the next worker "
        "took it when the timer fired",
    ),
    Moment.RESET: _Meaning(
        kills_a_worker=False,
        kills_in_the_workflow=False,
        in_default_set=False,
        needs_a_return=False,
        needs_the_result_seen=False,
        kills_as_scheduled=False,
        dies="the run ended, and an operator resets it to before the activity",
    ),
}


_POSITION = re.compile(r"^[0-9]+$")
_NAMED = re.compile(r"^(?P<name>.+?)(?:#(?P<occurrence>[0-9]+))?$")
_REPEAT = re.compile(r"^(?P<target>.*?)\*(?P<repeat>[0-9]+)$")
_EFFECT = re.compile(r"^(?P<target>.+)\.(?P<effect>[0-9]+)$")
_EFFECT_LABEL = re.compile(
    r"^(?P<boundary>.*), effect (?P<effect>[0-9]+) \((?P<what>.*)\)$", re.DOTALL
)
_FORMS = [m.form for m in Moment]
SYNTAX = (
    f"{', '.join(_FORMS[:-1])} or {_FORMS[-1]}, N a position (1, 2, ...), an activity name "
    "or a boundary's label, with *R to crash R times; or a moment alone, for its every point"
)
GLOSSARY = "; ".join(f"{m.form} ({m.dies})" for m in Moment)
MAX_REPEAT = 5


@dataclass(kw_only=True, frozen=True)
class CrashPoint:
    """A crash point as the user writes it: `MOMENT:N` (`after-effect:N`, `reset:N`, ...), N a
    position in scheduling order or an activity type (`name#k`), optionally in a child or a
    later run (`Child/name`, `run 2: name`), and `*R` to crash R workers in a row. The runner
    resolves it against the reference run's boundaries (CellPoint)."""

    moment: Moment
    position: int | None = None  # 1-based, in scheduling order ...
    activity: str | None = None  # ... or an activity type name
    occurrence: int = 1  # which run of that activity type (name#2)
    repeat: int = 1  # crashes at this point: the first worker's, then its successors'
    effect: int = 0  # an `effect` point's K: the boundary's K-th effect (0: another moment)
    text: str = field(default="", compare=False)  # as written (matched against labels)

    @property
    def every_boundary(self) -> bool:
        """Written as its moment alone (`after-effect`): the moment's point at every boundary,
        as the default set makes them."""
        return self.position is None and self.activity is None

    def __str__(self) -> str:
        """The point as it is written, `parse`'s inverse: every crash point's text is made
        here (a cell's, a site's) and read by `parse`."""
        if self.every_boundary:
            return self.moment.value
        if self.position is not None:
            target = str(self.position)
        else:
            target = (
                f"{self.activity}#{self.occurrence}"
                if self.occurrence != 1
                else (self.activity or "")
            )
        target += f".{self.effect}" if self.effect else ""
        return f"{self.moment.value}:{target}" + (f"*{self.repeat}" if self.repeat > 1 else "")

    @classmethod
    def parse(cls, text: str) -> CrashPoint:
        moment_text, colon, target = text.strip().partition(":")
        target = target.strip()
        if not colon and moment_text in {m.value for m in Moment}:
            if not (Moment(moment_text).kills_a_worker or Moment(moment_text).kills_while_waiting):
                raise CrashPointError(f"{text!r}: a {moment_text} names its boundary ({text}:N)")
            return cls(moment=Moment(moment_text))
        if moment_text not in {m.value for m in Moment} or not colon or not target:
            raise CrashPointError(f"unknown crash point {text!r}; expected {SYNTAX}")
        moment = Moment(moment_text)
        repeat = 1
        if (suffix := _REPEAT.match(target)) is not None:
            target, repeat = suffix["target"].strip(), int(suffix["repeat"])
            if not 1 <= repeat <= MAX_REPEAT:
                raise CrashPointError(
                    f"unknown crash point {text!r}: *R crashes 1 to {MAX_REPEAT} times"
                )
            if not moment.kills_a_worker and repeat > 1:
                raise CrashPointError(f"unknown crash point {text!r}: a {moment} is not repeated")
        effect = 0
        if moment.kills_at_an_effect:
            effect = 1
            if (numbered := _EFFECT.match(target)) is not None:
                target, effect = numbered["target"].strip(), int(numbered["effect"])
            if effect < 1:
                raise CrashPointError(f"unknown crash point {text!r}: effects start at .1")
        if _POSITION.match(target):
            if int(target) < 1:
                raise CrashPointError(f"unknown crash point {text!r}: positions start at 1")
            return cls(
                moment=moment, position=int(target), repeat=repeat, effect=effect, text=target
            )
        named = _NAMED.match(target)
        if named is None:
            raise CrashPointError(f"unknown crash point {text!r}; expected {SYNTAX}")
        occurrence = int(named["occurrence"] or 1)
        if occurrence < 1:
            raise CrashPointError(f"unknown crash point {text!r}: occurrences start at #1")
        return cls(
            moment=moment,
            activity=named["name"],
            occurrence=occurrence,
            repeat=repeat,
            effect=effect,
            text=target,
        )


def effect_label(boundary: str, effect: int, what: str) -> str:
    """A point at an effect as the table names it: `place_order, effect 1 (POST shop/orders)`."""
    return f"{boundary}, effect {effect} ({what})"


def killed_after(label: str) -> str:
    """What a point at an effect killed after, from its label: `place_order's effect 1 (POST
    shop/orders)` (a label of no effect: itself)."""
    found = _EFFECT_LABEL.match(label)
    if found is None:
        return label
    return f"{found['boundary']}'s effect {found['effect']} ({found['what']})"


NOT_REACHED = "not reached: "  # how a point its run never reached is listed as not tested


@dataclass
class Untested:
    boundary: str
    why: str
