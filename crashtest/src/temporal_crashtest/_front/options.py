"""Every option of a crash test, each declared once (`_option.Option`), and how a test runs
(`CrashTestOptions`, whose fields are the options declared here, `OPTIONS`).

The others are declared beside what they belong to: the code under test and its versions with
`Target` (`_plan.target.OPTIONS`), each observer kind's with the kind (`_observers.given.KINDS`),
each report format's file with the format (`_report.formats.FORMATS`). `every_option()` is all of
them, in the order `--help` and crashtest/docs/options.md list them; the command line's `run`,
its reading, the checks and the pytest fixture's keywords are made from it.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporal_crashtest._errors import CrashTestAborted, InputError
from temporal_crashtest._files import read_json
from temporal_crashtest._loading import load_callable
from temporal_crashtest._observers import ObserverSettings
from temporal_crashtest._option import Option, Part, Reads, declared
from temporal_crashtest._plan import target
from temporal_crashtest._plan.compare import to_json
from temporal_crashtest._plan.reference import NEW, OLD
from temporal_crashtest._plan.shards import parse_shard
from temporal_crashtest._plan.target import Drive
from temporal_crashtest._points.points import GLOSSARY, MAX_REPEAT, CrashPoint, Moment
from temporal_crashtest._report.report import Cell
from temporal_crashtest._run.session import DEFAULT_DEADLINE_S


def default_jobs() -> int:
    """Cells mostly wait (on the server, and on timeouts); their workers are forked, not
    started afresh, so many cells fit on a core."""
    return 8 * (os.cpu_count() or 1)


class _Nothing:
    def __repr__(self) -> str:
        return "NOTHING"


MAX_HORIZON_DAYS = 36500  # a century: past it, a timestamp stops meaning much
NOTHING: Any = _Nothing()  # `expect` not given (None is a state one may expect)


def _expected(text: str) -> Any:
    if text.strip() in (OLD, NEW):
        raise InputError(f"--expect {text.strip()}: a version is --expect-version {text.strip()}")
    return read_json(text, "--expect")


def _json_state(value: Any) -> None:
    """A state to expect is compared as JSON once the reference ran: checked before it runs."""
    if value is not NOTHING:
        try:
            to_json(value, "expect")
        except CrashTestAborted as err:
            detail = str(err).partition(": ")[2]
            raise InputError(f"expect is not JSON: {detail}") from None


def _seconds(name: str, zero: bool = False) -> Callable[[float], None]:
    def check(value: float) -> None:
        if not (math.isfinite(value) and (value >= 0 if zero else value > 0)):
            kind = "a number of seconds, 0 or more" if zero else "a positive number of seconds"
            raise InputError(f"{name} must be {kind}, not {value}")

    return check


def _horizon(value: float) -> None:
    if not (math.isfinite(value) and 0 < value <= MAX_HORIZON_DAYS):
        raise InputError(
            f"horizon_days must be a number of days, 0 to {MAX_HORIZON_DAYS}, not {value}"
        )


def _repeat(value: int) -> None:
    if not 1 <= value <= MAX_REPEAT:
        raise InputError(f"repeat must be 1 to {MAX_REPEAT}")


def _jobs(value: int) -> None:
    if value < 1:
        raise InputError("jobs must be at least 1")


def _points(value: Sequence[str] | None) -> None:
    if value is None:
        return
    if not value:
        raise InputError(
            "no crash points given: a test of none would pass without testing anything "
            "(leave points out for every boundary's)"
        )
    for point in value:
        CrashPoint.parse(point)


def _version(value: str | None) -> None:
    if value not in (None, OLD, NEW):
        raise InputError(f"expect_version is {OLD!r} or {NEW!r}, not {value!r}")


def _shard(value: tuple[int, int] | None) -> None:
    if value is not None:
        parse_shard("/".join(map(str, value)))


def _a_shard(value: Any) -> str:
    return value if isinstance(value, str) else "/".join(map(str, value))


def _moments() -> str:
    *most, last = [str(m) for m in Moment.default_set()]
    return f"{', '.join(most)} and {last}"


OBSERVE = Option(
    "observe",
    "MODULE:FUNC, (workflow_id) -> JSON: your view of a run's final state (this, an observer "
    "kind's flag such as --http, or both)",
    Part.CALL,
    code=True,
    metavar="MODULE:FUNC",
)
_WHAT_IT_WAITS_FOR = (
    Option(
        "drive",
        "MODULE:FUNC, (handle) -> None: sends the signals and updates the run waits for; it runs "
        "beside every run",
        Part.RUN, code=True, metavar="MODULE:FUNC",
        read=lambda text: load_callable(text, "--drive"),
    ),
    Option(
        "expect",
        "the final state a run without a crash must reach: JSON, or @FILE; a reference that "
        "differs ends the test before any cell",
        Part.RUN, reads=Reads.JSON, default=NOTHING, read=_expected, check=_json_state,
        default_text="",
    ),
    Option(
        "expect_version",
        "in a deploy test: every crashed run must end in this version's no-crash state "
        "(default: either's)",
        Part.RUN, choices=(OLD, NEW), check=_version,
    ),
)  # fmt: skip
_HOW_TO_CRASH = (
    Option(
        "points",
        f"only these crash points, comma-separated (default: every {_moments()}; a moment "
        "alone, as after-effect, is its every point; effect: each effect an activity made — a "
        "committed database write, an answered HTTP request, a "
        f"temporal_crashtest.effect): {GLOSSARY}",
        Part.RUN, reads=Reads.LIST, check=_points, metavar="POINT[,POINT...]",
    ),
    Option(
        "repeat", "crash this many workers in a row at each point", Part.RUN,
        type=int, default=1, check=_repeat, metavar="N",
    ),
    Option(
        "jobs", "cells run at once", Part.RUN, type=int, default_factory=default_jobs,
        check=_jobs, default_text="8 per core", metavar="N",
    ),
    Option(
        "deadline_s", "how long one cell may take, in seconds", Part.RUN, type=float,
        default=DEFAULT_DEADLINE_S, check=_seconds("deadline_s"), metavar="SECONDS",
    ),
    Option(
        "resume_after_s",
        "wait this long after a kill (or before a reset) before the run resumes, e.g. past an "
        "idempotency key's time to live",
        Part.RUN, type=float, default=0.0, check=_seconds("resume_after_s", zero=True),
        metavar="SECONDS",
    ),
    Option(
        "real_timeouts",
        "wait for the server's timeouts after every kill, as production does (slow)",
        Part.RUN, reads=Reads.SWITCH, default=False,
    ),
    Option(
        "real_time",
        "a run's sleeps and timeouts take their real time (default: every run the tool starts "
        "asks the server to skip the time it waits on timers — Temporal's time skipping — "
        "where the server allows it)",
        Part.RUN, reads=Reads.SWITCH, default=False,
    ),
    Option(
        "horizon_days",
        "how far time skipping may move a run's clock ahead, in days; past it (or past the "
        "server's budget of skips) a run's timers take their real time, and a run still waiting "
        "at its deadline is named with both",
        Part.RUN, type=float, default=365.0, check=_horizon, metavar="DAYS",
    ),
    Option(
        "shard",
        "run shard K of N's share of the crash points (each point in exactly one shard; each "
        "shard's report stands alone; `merge` joins their --json reports)",
        Part.RUN, metavar="K/N", read=parse_shard, check=_shard, write=_a_shard,
    ),
    Option(
        "exact",
        "a run per crash point (default: several points crashed in one run, a group that "
        "differs split down to single points; the same verdicts, for an observer that shows "
        "every effect)",
        Part.RUN, reads=Reads.SWITCH, default=False,
    ),
)  # fmt: skip
_WHERE_THE_SERVER_IS = (
    Option(
        "address",
        "Temporal's HOST:PORT (default: TEMPORAL_ADDRESS or the Temporal CLI's profile, with its "
        "API key and TLS; else a server on 127.0.0.1:7233, else a private dev server started "
        "for this run)",
        Part.RUN,
        metavar="HOST:PORT",
    ),
    Option(
        "namespace", "default: TEMPORAL_NAMESPACE or the profile's, else default", Part.RUN,
        metavar="NAME",
    ),
    Option(
        "dev_server",
        "start a private dev server for this test, whatever is configured or listening on "
        "127.0.0.1:7233",
        Part.RUN, reads=Reads.SWITCH, default=False,
    ),
)  # fmt: skip
_WHAT_IS_KEPT = (
    Option(
        "logs",
        "keep the workers' logs here (default: a temporary folder, removed when every cell "
        "matches)",
        Part.RUN, type=Path, metavar="DIR",
    ),
    Option(
        "timelines",
        "keep each run's timeline in the report (`Report.timelines`, what the HTML report draws; "
        "the command line keeps them for --html, and for a shard's --json); one more history "
        "read per run",
        Part.RUN, reads=Reads.NO_FLAG, default=False,
    ),
    Option(
        "observers",
        "observers given by their settings (`HttpObserver(...)`; the command line: each kind's "
        "flags); with one, `observe` may be None",
        Part.RUN, reads=Reads.NO_FLAG, default=(),
    ),
    Option(
        "progress", "called with (cells done, cells in all, the cell) as each cell ends",
        Part.RUN, reads=Reads.NO_FLAG,
    ),
    Option(
        "say", "called with each line of progress (the server used, the reference, the points)",
        Part.RUN, reads=Reads.NO_FLAG,
    ),
)  # fmt: skip
OPTIONS: tuple[Option, ...] = (
    *_WHAT_IT_WAITS_FOR,
    *_HOW_TO_CRASH,
    *_WHERE_THE_SERVER_IS,
    *_WHAT_IS_KEPT,
)


@dataclass(kw_only=True, frozen=True)
class CrashTestOptions:
    """How a crash test runs. Each field is an option declared in `OPTIONS` above, with its
    default, what it holds and its check (crashtest/docs/options.md lists them all)."""

    drive: Drive | None = declared(OPTIONS, "drive")
    expect: Any = declared(OPTIONS, "expect")
    expect_version: str | None = declared(OPTIONS, "expect_version")
    points: Sequence[str] | None = declared(OPTIONS, "points")
    repeat: int = declared(OPTIONS, "repeat")
    jobs: int = declared(OPTIONS, "jobs")
    deadline_s: float = declared(OPTIONS, "deadline_s")
    resume_after_s: float = declared(OPTIONS, "resume_after_s")
    real_timeouts: bool = declared(OPTIONS, "real_timeouts")
    real_time: bool = declared(OPTIONS, "real_time")
    horizon_days: float = declared(OPTIONS, "horizon_days")
    shard: tuple[int, int] | None = declared(OPTIONS, "shard")
    exact: bool = declared(OPTIONS, "exact")
    address: str | None = declared(OPTIONS, "address")
    namespace: str | None = declared(OPTIONS, "namespace")
    dev_server: bool = declared(OPTIONS, "dev_server")
    logs: Path | None = declared(OPTIONS, "logs")
    timelines: bool = declared(OPTIONS, "timelines")
    observers: tuple[ObserverSettings, ...] = declared(OPTIONS, "observers")
    progress: Callable[[int, int, Cell], None] | None = declared(OPTIONS, "progress")
    say: Callable[[str], None] | None = declared(OPTIONS, "say")

    def check(self) -> None:
        """InputError (or CrashPointError) for an option out of range, before anything starts."""
        for option in OPTIONS:
            if option.check is not None:
                option.check(getattr(self, option.name))
        if self.dev_server and self.address:
            raise InputError("a private dev server and an address: give one or the other")
        for settings in self.observers:
            settings.check()


def every_option() -> tuple[Option, ...]:
    """Every option, in the order the command line lists them: the code under test and its
    versions, the observe function and each observer kind's, how the test runs, and a file per
    report format."""
    from temporal_crashtest._observers.given import KINDS
    from temporal_crashtest._report.formats import FORMATS

    observers = tuple(option for kind in KINDS for option in kind.options)
    return (*target.OPTIONS, OBSERVE, *observers, *OPTIONS, *(f.option for f in FORMATS))


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Every option's flag, on `run`'s parser."""
    for option in every_option():
        option.add_to(parser.add_argument)


def values_from(args: argparse.Namespace, part: Part) -> dict[str, Any]:
    """The values the command line gave one part, by field (each option's default when not
    given)."""
    return {o.attribute: o.from_args(args) for o in every_option() if o.part is part}
