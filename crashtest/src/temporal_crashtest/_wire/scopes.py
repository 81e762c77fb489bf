"""Where a run sits in its tree, for a kill on the wire: a worker command's calls name a run by
its workflow id and run id, a crash point by its scope (`@R`: run R of the root's chain,
`/Type#K@R` below it: the K-th child of that type, run R of its own chain; `_interceptor`). The
server's histories of the tree tell one from the other (`_polling.tree_scope`), read again until
the run is there: a parent's history records its child's start a moment after the child can
run."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping

from temporalio.service import RPCError

# Every run of the tree, (workflow id, run id) -> its scope, as the server has it now.
TreeReader = Callable[[], Awaitable[Mapping[tuple[str, str], str]]]
AGAIN_S = 0.05  # how soon a run not yet in the tree is looked for again
FOUND_WITHIN_S = 5.0  # how long: a run still missing is in no scope a kill is aimed at


class RunScopes:
    """The scopes of one run's tree, read through `read` when a run is not known yet."""

    def __init__(self, read: TreeReader, found_within_s: float = FOUND_WITHIN_S) -> None:
        self._read, self._within_s = read, found_within_s
        self._known: dict[tuple[str, str], str] = {}

    async def of(self, workflow_id: str, run_id: str) -> str | None:
        """The scope of run `run_id` of `workflow_id` (None: not in the tree in time)."""
        run = (workflow_id, run_id)
        until = time.monotonic() + self._within_s
        while run not in self._known:
            try:
                self._known = dict(await self._read())
            except RPCError:  # not there yet, or the server blinked: looked for again
                pass
            if run in self._known or time.monotonic() >= until:
                break
            await asyncio.sleep(AGAIN_S)
        return self._known.get(run)
