"""The observers a crash test may be given (`KINDS`, one row per kind the user gives as settings)
and the ones it was given: the user's function, and the settings of the others."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from temporal_crashtest._errors import InputError
from temporal_crashtest._observers import Kind, Observer, Observers, ObserverSettings, http
from temporal_crashtest._observers.function import UsersView
from temporal_crashtest._plan.target import Observe

KINDS: tuple[Kind, ...] = (http.KIND,)


def settings_from(args: argparse.Namespace) -> tuple[ObserverSettings, ...]:
    """The observers the command line asked for, by their settings."""
    given = []
    for kind in KINDS:
        settings = kind.settings({o.name: o.from_args(args) for o in kind.options})
        given += [settings] if settings is not None else []
    return tuple(given)


def observers_for(
    observe: Observe | None,
    settings: Sequence[ObserverSettings],
    log_dir: Path,
    deadline_s: float,
) -> Observers:
    """The observers a crash test was given: the user's function, the others' settings, or
    both (InputError: neither, or one kind twice)."""
    check_given(observe, settings)
    members: list[Observer] = [] if observe is None else [UsersView(observe, deadline_s)]
    members += [given.observer(log_dir, deadline_s) for given in settings]
    names = [member.name for member in members]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise InputError(
            f"observers given twice: {', '.join(twice)} (each kind once among `observers`)"
        )
    return Observers(tuple(members))


def check_given(observe: object, settings: Sequence[ObserverSettings]) -> None:
    """InputError, before anything loads or starts, when nothing would observe the runs."""
    if observe is None and not settings:
        raise InputError(
            "nothing observes the runs: give an observe function (--observe MODULE:FUNC), the "
            "HTTP observer (--http), or both"
        )


def check_beside_a_command(settings: Sequence[ObserverSettings]) -> None:
    """InputError for an observer that watches from inside a Python worker (it has a half there)
    when the worker is a command: it would see nothing of its runs."""
    for given in settings:
        member = given.observer(Path(os.devnull), 0.0)  # made to be asked, never used
        if member.half is not None:
            raise InputError(
                f"the {member.name} observer watches from inside a Python worker: a worker "
                "command's runs are not seen by it (observe their effects with --observe)"
            )
