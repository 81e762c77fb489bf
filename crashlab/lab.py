"""Running one cell: a fresh run, a real process SIGKILLed at the cell's crash point, a fresh
process that resumes the run, and the outcome read back from Postgres."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from dataclasses import dataclass, field

from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy

from activities.models import GroceryRequest, GroceryResult
from crashlab.cells import RESET, Cell, CellResult, Engine
from crashlab.processes import Processes
from crashlab.reset import reset_before_activity
from store.outcome import RunState, read_run_state
from workflows.grocery import GroceryAgentWorkflow

HOUSEHOLD = "household-1"
PROCESS_TIMEOUT_S = 60
RESULT_TIMEOUT_S = 90


class CellFailed(Exception):
    """The cell could not be run as designed (not: the design failed, which is a result)."""


@dataclass
class Lab:
    procs: Processes
    pool: AsyncConnectionPool
    client: Client | None
    references: dict[Engine, dict[str, object]] = field(default_factory=dict)

    async def run_cell(self, cell: Cell) -> CellResult:
        started = time.monotonic()
        point = cell.crash_at.replace(":", "")
        run_id = f"lab-{cell.engine}-{cell.design}-{point}-{uuid.uuid4().hex[:8]}"
        error = None
        try:
            if cell.engine == "journal":
                final = await self._journal(cell, run_id)
            else:
                final = await self._temporal(cell, run_id)
        except Exception as err:  # one broken cell is reported, and the matrix goes on
            error = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
            async with self.pool.connection() as conn:
                final = await read_run_state(conn, run_id)
        reference = self.references.get(cell.engine)
        return CellResult(
            engine=cell.engine,
            design=cell.design,
            crash_at=cell.crash_at,
            model_calls=final.model_calls,
            orders=len(final.orders),
            emails=len(final.emails),
            matches_no_crash=error is None and final.final_state() == reference,
            expected=cell.expected_match,
            seconds=round(time.monotonic() - started, 2),
            error=error,
        )

    async def reference(self, engine: Engine) -> None:
        """The final state of a run that never crashed, which every cell is compared with."""
        design = "durable" if engine == "journal" else "workflow"
        run_id = f"lab-reference-{engine}-{uuid.uuid4().hex[:8]}"
        cell = Cell(engine=engine, design=design, crash_at="none")
        final = await (
            self._journal(cell, run_id) if engine == "journal" else self._temporal(cell, run_id)
        )
        self.references[engine] = final.final_state()

    async def _journal(self, cell: Cell, run_id: str) -> RunState:
        args = ["-m", "journal", "run", "--run-id", run_id, "--design", cell.design]
        args += ["--household", HOUSEHOLD]
        if cell.crash_at != "none":
            code = await self.procs.run(
                f"{run_id}-crash", args, PROCESS_TIMEOUT_S, CRASH_AT=cell.crash_at
            )
            if code != -signal.SIGKILL:
                raise CellFailed(f"the crashing process exited with {code}, not by SIGKILL")
        code = await self.procs.run(run_id, args, PROCESS_TIMEOUT_S)
        if code != 0:
            last = self.procs.last_line(run_id)
            raise CellFailed(f"the resumed process exited with {code}: {last}")
        async with self.pool.connection() as conn:
            return await read_run_state(conn, run_id)

    async def _temporal(self, cell: Cell, run_id: str) -> RunState:
        assert self.client is not None
        crash = cell.crash_at not in ("none", RESET)
        env = {"TASK_QUEUE": run_id, "KEY_STRATEGY": cell.design}
        first = await self.procs.start(
            f"{run_id}-w1", ["worker.py"], **env, **({"CRASH_AT": cell.crash_at} if crash else {})
        )
        workers = [first]
        try:
            handle = await self.client.start_workflow(
                GroceryAgentWorkflow.run,
                GroceryRequest(household=HOUSEHOLD, week="2026-W49"),
                id=run_id,
                task_queue=run_id,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
            if crash:
                code = await self.procs.wait(first, PROCESS_TIMEOUT_S)
                if code != -signal.SIGKILL:
                    raise CellFailed(f"the crashing worker exited with {code}, not by SIGKILL")
                workers.append(await self.procs.start(f"{run_id}-w2", ["worker.py"], **env))
            result: GroceryResult = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
            if cell.crash_at == RESET:
                new_run = await reset_before_activity(
                    self.client, run_id, handle.result_run_id or ""
                )
                again = self.client.get_workflow_handle_for(
                    GroceryAgentWorkflow.run, run_id, run_id=new_run
                )
                result = await asyncio.wait_for(again.result(), RESULT_TIMEOUT_S)
        finally:
            await asyncio.gather(*(self.procs.stop(w) for w in workers))
        async with self.pool.connection() as conn:
            final = await read_run_state(conn, run_id)
        return final.model_copy(update={"summary": result.summary.text})
