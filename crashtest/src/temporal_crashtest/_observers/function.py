"""The user's observer: `observe(workflow_id)`, their own view of a run's final state (a query
of their database, a call to a service's API), sync or async, as JSON."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from temporal_crashtest._calls import call_apart
from temporal_crashtest._errors import CrashTestAborted
from temporal_crashtest._plan.compare import to_json
from temporal_crashtest._plan.target import Observe


@dataclass(frozen=True)
class UsersView:
    """`observe(workflow_id)`, within `deadline_s`; it needs nothing in the worker processes."""

    observe: Observe
    deadline_s: float
    name: str = "observe"
    half: str | None = None

    def worker_env(self) -> dict[str, str]:
        return {}

    async def view(self, workflow_id: str) -> Any:
        try:
            value = await asyncio.wait_for(call_apart(self.observe, workflow_id), self.deadline_s)
        except TimeoutError:
            raise CrashTestAborted(
                f"observe({workflow_id!r}) did not return within {self.deadline_s:g} s "
                "(--deadline-s): is it waiting on something that never comes?"
            ) from None
        except Exception as err:
            raise CrashTestAborted(
                f"observe({workflow_id!r}) raised {type(err).__name__}: {err}"
            ) from None
        return to_json(value, f"observe({workflow_id!r})")

    def untested(self) -> list[tuple[str, str]]:
        return []
