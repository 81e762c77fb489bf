"""Observers: what a crash test compares a run by. Each has

- a `name`: its key in the state, when several observe;
- `half`: the module of its half in the worker processes (None: it has none), which has
  `install_from_env(environ) -> bool` and `attempt_started(root, boundary, attempt)`;
- `worker_env()`: the settings its half reads from the environment ({} if it has none; called
  once, as the test starts);
- `view(workflow_id)`: its view of a run's end, as JSON;
- `untested()`: what it saw but could not name a run for, as (what, why) rows of the report's
  "not tested".

The state of a run is one rule for any mix (`Observers.state`): one observer's view alone, or
several views by name (`{"observe": ..., "http": ...}`). In the worker process, an observer's
half is installed from its settings and told each activity attempt as it starts
(`_worker/halves.py`, from the modules `Observers.worker_env` names). Members: the user's function
(`function.UsersView`), the HTTP requests (`http.HttpRequests`).

An observer kind other than the user's function is given as settings (`ObserverSettings`, e.g.
`HttpObserver`: `CrashTestOptions.observers`), and its options on the command line and in the pytest
fixture are its `Kind`'s options, and the kind a row of `given.KINDS`. To add one, see "An observer"
under "To add" in docs/architecture.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from temporal_crashtest._option import Option
from temporal_crashtest._worker.halves import HALVES_ENV


class Observer(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def half(self) -> str | None: ...

    def worker_env(self) -> dict[str, str]: ...

    async def view(self, workflow_id: str) -> Any: ...

    def untested(self) -> list[tuple[str, str]]: ...


@dataclass(frozen=True)
class Observers:
    """The observers of one crash test, in the order their views are listed."""

    members: tuple[Observer, ...]

    def worker_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for member in self.members:
            env.update(member.worker_env())
        halves = [member.half for member in self.members if member.half is not None]
        return {**env, HALVES_ENV: ",".join(halves)} if halves else env

    async def state(self, workflow_id: str) -> Any:
        """The run's end, as the observers see it."""
        views = await asyncio.gather(*(m.view(workflow_id) for m in self.members))
        if len(views) == 1:
            return views[0]
        return {m.name: v for m, v in zip(self.members, views, strict=True)}

    def untested(self) -> list[tuple[str, str]]:
        return [row for member in self.members for row in member.untested()]


class ObserverSettings(Protocol):
    """An observer as a user gives it (`CrashTestOptions.observers`)."""

    def check(self) -> None:
        """InputError for a setting out of range, before anything starts."""
        ...

    def observer(self, log_dir: Path, deadline_s: float) -> Observer:
        """The observer, for a crash test that keeps its files in `log_dir`."""
        ...


@dataclass(frozen=True)
class Kind:
    """An observer kind's options (each declared once: the command line's flags, the pytest
    fixture's keywords and the options page are made from them), and its settings from their
    values, by name (None: not asked for)."""

    options: tuple[Option, ...]
    settings: Callable[[Mapping[str, Any]], ObserverSettings | None]
