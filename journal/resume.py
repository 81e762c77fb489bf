"""Resume every unfinished run: what an operator runs after a crash (`python -m journal resume`).

An unfinished run is one whose `agent_runs.status` is still `running`. A run that another
process is running right now (it holds the run's lock) is left to that process.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from psycopg_pool import AsyncConnectionPool

from agent.grocer import Grocer
from agent.llm import Model
from infra.errors import AgentError
from journal.agent import run_to_completion
from journal.engine import Design, Pause, RunBusy

log = logging.getLogger(__name__)

_UNFINISHED = (
    "select run_id, design, household from agent_runs where status = 'running' order by started_at"
)
WAIT_FOR_OTHERS_S = 0.2
READY_LINE = "looking for unfinished runs"


@dataclass
class Resumed:
    completed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # run id -> why (it stays unfinished)
    busy: set[str] = field(default_factory=set)  # being run by another process


async def resume_unfinished(
    pool: AsyncConnectionPool,
    model: Model,
    *,
    concurrency: int,
    until_done: bool = False,
    pause: Pause | None = None,
    grocer: Grocer | None = None,
) -> Resumed:
    """Run every unfinished run to its end, `concurrency` at a time. With `until_done`, keep
    going until none is left, waiting for the runs other processes hold. A run that fails for a
    reason of its own is reported and not tried again here; losing Postgres ends the call."""
    resumed = Resumed()
    limit = asyncio.Semaphore(concurrency)
    log.info("%s (%d at a time)", READY_LINE, concurrency)

    async def one(run_id: str, design: str, household: str) -> None:
        async with limit, pool.connection() as conn:
            try:
                await run_to_completion(
                    conn,
                    model,
                    run_id,
                    Design.parse(design),
                    household,
                    pause=pause,
                    grocer=grocer,
                )
            except RunBusy:
                resumed.busy.add(run_id)
                return
            except AgentError as err:
                log.warning("run %s failed: %s", run_id, err)
                resumed.failed[run_id] = str(err)
                return
        resumed.busy.discard(run_id)
        resumed.completed.append(run_id)

    while True:
        async with pool.connection() as conn:
            rows = await (await conn.execute(_UNFINISHED)).fetchall()
        todo = [row for row in rows if row[0] not in resumed.failed]
        if not todo:
            return resumed
        before = len(resumed.completed)
        await asyncio.gather(*(one(*row) for row in todo))
        if not until_done:
            return resumed
        if len(resumed.completed) == before:  # every one left is another process's, for now
            await asyncio.sleep(WAIT_FOR_OTHERS_S)
