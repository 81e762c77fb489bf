"""Observers: what a crash test compares a run by. Each has

- a `name`: its key in the state, when several observe;
- `worker_env()`: the settings its half in the worker processes reads from the environment
  ({} if it has none; called once, as the test starts);
- `view(workflow_id)`: its view of a run's end, as JSON;
- `untested()`: what it saw but could not name a run for, as (what, why) rows of the report's
  "not tested".

The state of a run is one rule for any mix (`Observers.state`): one observer's view alone, or
several views by name (`{"observe": ..., "http": ...}`). In the worker process, an observer's
half is installed from its settings and told each activity attempt as it starts
(`in_worker.py`). Members: the user's function (`function.UsersView`), the HTTP requests
(`http.HttpRequests`), made from a crash test's options in `given.py`. To add one, see
"An observer" under "To add" in docs/architecture.md.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol


class Observer(Protocol):
    @property
    def name(self) -> str: ...

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
        return env

    async def state(self, workflow_id: str) -> Any:
        """The run's end, as the observers see it."""
        views = await asyncio.gather(*(m.view(workflow_id) for m in self.members))
        if len(views) == 1:
            return views[0]
        return {m.name: v for m, v in zip(self.members, views, strict=True)}

    def untested(self) -> list[tuple[str, str]]:
        return [row for member in self.members for row in member.untested()]
