"""The observers a crash test was given, from its options: one row per kind."""

from __future__ import annotations

from pathlib import Path

from temporal_crashtest._errors import InputError
from temporal_crashtest._model import Observe
from temporal_crashtest._observers import Observer, Observers
from temporal_crashtest._observers.function import UsersView
from temporal_crashtest._observers.http import HttpObserver, HttpRequests


def observers_for(
    observe: Observe | None, http: HttpObserver | None, log_dir: Path, deadline_s: float
) -> Observers:
    """The observers a crash test was given: the user's function, the HTTP observer, or both
    (InputError: neither)."""
    check_given(observe, http)
    members: list[Observer] = []
    if observe is not None:
        members.append(UsersView(observe, deadline_s))
    if http is not None:
        members.append(HttpRequests(http, log_dir))
    return Observers(tuple(members))


def check_given(observe: object, http: HttpObserver | None) -> None:
    """InputError, before anything loads or starts, when nothing would observe the runs."""
    if observe is None and http is None:
        raise InputError(
            "nothing observes the runs: give an observe function (--observe MODULE:FUNC), the "
            "HTTP observer (--http), or both"
        )
