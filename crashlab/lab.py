"""Running one cell: a fresh run, a real process SIGKILLed at the cell's crash point, a fresh
process that resumes the run, and the final state read back from Postgres.

Journal cells run `python -m journal`, which keeps its own crash lines. Temporal cells are
crashtest cells: the grocery worker is SIGKILLed from outside, by crashtest's interceptor.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from psycopg_pool import AsyncConnectionPool
from temporal_crashtest.processes import Processes
from temporal_crashtest.runner import Reference, Runner, Target, replace_observe
from temporalio.common import WorkflowIDReusePolicy

from agent.data import EXAMPLE_WEEK, GroceryRequest
from agent.grocer import Grocer, GrocerClient
from agent.outcome import final_state, read_run_state
from agent.steps import PLACE_ORDER, STEP_NAMES
from crashlab.cells import (
    GROCER_ROWS,
    KEY_EXPIRY,
    RERUN_KEY_EXPIRY,
    RESET,
    UNCHECKED,
    Engine,
    MatrixCell,
    MatrixResult,
)
from crashlab.servers import LabGrocer

HOUSEHOLD = "household-1"
PROCESS_TIMEOUT_S = 60
RESULT_TIMEOUT_S = 90
KEY_TTL_S = 1.0  # the lab's grocer forgets an idempotency key after this
# The agent's data converter, named for the crash tool's worker processes.
DATA_CONVERTER = "temporalio.contrib.pydantic:pydantic_data_converter"


class CellFailed(Exception):
    """The cell could not be run as designed (not: the design failed, which is a result)."""


def grocery_target(key_strategy: str) -> Target:
    """The grocery agent as crashtest sees it: `worker.py`'s factory, with this key strategy."""
    return Target(
        worker="worker:build_worker",
        workflow="GroceryAgentWorkflow",
        input=GroceryRequest(household=HOUSEHOLD, week=EXAMPLE_WEEK).model_dump(),
        data_converter=DATA_CONVERTER,
        env={"KEY_STRATEGY": key_strategy},
    )


def grocery_crashtest_args(household: str) -> list[str]:
    """`python -m temporal_crashtest run`'s arguments for the grocery agent, as `make crashtest`
    gives them (the bench and the tests add their own)."""
    return [
        "--worker", "worker:build_worker",
        "--workflow", "workflows.grocery:GroceryAgentWorkflow",
        "--input", json.dumps({"household": household, "week": EXAMPLE_WEEK}),
        "--observe", "agent.outcome:final_state",
        "--data-converter", DATA_CONVERTER,
    ]  # fmt: skip


def crashing_worker(task_queue: str, crash_at: str) -> list[str]:
    """The arguments of a grocery worker that SIGKILLs itself at `crash_at` (`after-effect:4`,
    `after-effect:place_order`): crashtest's worker process around `worker.py`'s factory, as a
    user crashes a worker by hand (the product itself knows nothing of crashes)."""
    return ["-m", "temporal_crashtest.worker", "--worker", "worker:build_worker",
            "--task-queue", task_queue, "--data-converter", DATA_CONVERTER,
            "--crash-at", crash_at]  # fmt: skip


def counts(state: dict[str, Any]) -> tuple[int, int, int]:
    """(model calls, orders, emails) of a final state (`RunState.comparable()`)."""
    return state["model_calls"], len(state["orders"]), len(state["emails"])


@dataclass
class Lab:
    procs: Processes
    pool: AsyncConnectionPool
    runner: Runner | None  # for the Temporal cells
    references: dict[Engine, Any] = field(default_factory=dict)
    temporal_reference: Reference | None = None
    grocer: LabGrocer | None = None  # for the key-expiry cells, started on first use

    async def run_cell(self, cell: MatrixCell) -> MatrixResult:
        started = time.monotonic()
        point = cell.crash_at.replace(":", "")
        run_id = f"lab-{cell.engine}-{cell.design}-{point}-{uuid.uuid4().hex[:8]}"
        error = None
        matches = False
        try:
            if cell.engine == "journal":
                state = await self._journal(cell, run_id)
                matches = state == self.references["journal"]
            elif cell.crash_at in GROCER_ROWS:
                state, matches, error = await self._at_the_grocer(cell)
            else:
                state, matches, error = await self._temporal(cell)
        except Exception as err:  # one broken cell is reported, and the matrix goes on
            error = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
            state = await final_state(run_id)
        calls, orders, emails = counts(state)
        return MatrixResult(
            engine=cell.engine,
            design=cell.design,
            crash_at=cell.crash_at,
            model_calls=calls,
            orders=orders,
            emails=emails,
            matches_no_crash=error is None and matches,
            expected=cell.expected_match,
            seconds=round(time.monotonic() - started, 2),
            error=error,
        )

    async def reference(self, engine: Engine) -> None:
        """The final state of a run that never crashed, which every cell is compared with."""
        if engine == "journal":
            run_id = f"lab-reference-journal-{uuid.uuid4().hex[:8]}"
            cell = MatrixCell(engine="journal", design="durable", crash_at="none")
            self.references["journal"] = await self._journal(cell, run_id)
            return
        assert self.runner is not None
        reference = await self.runner.reference(grocery_target("workflow"))
        names = tuple(b.activity for b in reference.boundaries)
        if names != STEP_NAMES:
            raise CellFailed(f"the workflow ran {names}, not the agent's steps {STEP_NAMES}")
        self.temporal_reference = reference
        self.references["temporal"] = reference.observed

    async def _journal(self, cell: MatrixCell, run_id: str) -> dict[str, Any]:
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
            return (await read_run_state(conn, run_id)).comparable()

    async def _temporal(self, cell: MatrixCell) -> tuple[dict[str, Any], bool, str | None]:
        """A crashtest cell: crashed by the interceptor at the cell's point (or, for the reset
        row, crashtest's `reset:N` before the order step), resumed by a fresh worker, observed
        with `agent.outcome.final_state`."""
        reference = self.temporal_reference
        assert self.runner is not None and reference is not None
        point = None
        if cell.crash_at == RESET:
            point = reference.resolve(f"reset:{PLACE_ORDER.number}")
        elif cell.crash_at != "none":
            point = reference.resolve(cell.crash_at)
        result = await self.runner.cell(grocery_target(cell.design), point, reference)
        return result.observed, result.matches, result.error

    async def _at_the_grocer(self, cell: MatrixCell) -> tuple[dict[str, Any], bool, str | None]:
        """Orders at a grocer whose keys live KEY_TTL_S, and the week run again once the key has
        expired: a retry (the worker killed once the grocer has the order, the fresh worker
        started after the TTL), a reset of the finished run to before the order, or a second
        run of the same business id."""
        reference = self.temporal_reference
        assert self.runner is not None and reference is not None
        if self.grocer is None:
            self.grocer = LabGrocer(self.procs, KEY_TTL_S)
            await self.grocer.start()
        lab_grocer = Grocer(GrocerClient(self.grocer.url, self.grocer.api_key), KEY_TTL_S)

        async def observe(workflow_id: str) -> dict[str, Any]:
            async with self.pool.connection() as conn:
                return (await read_run_state(conn, workflow_id, lab_grocer)).comparable()

        checked = cell.design != UNCHECKED
        target = replace(
            grocery_target("workflow"),
            env={"KEY_STRATEGY": "workflow", "ORDER_BACKEND": "grocer",
                 "GROCER_URL": self.grocer.url, "GROCER_API_KEY": self.grocer.api_key,
                 "GROCER_KEY_TTL_S": str(KEY_TTL_S),
                 "ORDER_EFFECT_CHECK": "on" if checked else "off"},
            resume_after_s=KEY_TTL_S,
        )  # fmt: skip
        runner = replace_observe(self.runner, observe)
        moment = "after-effect" if cell.crash_at == KEY_EXPIRY else "reset"
        async with lab_grocer:
            if cell.crash_at == RERUN_KEY_EXPIRY:
                return await self._rerun(runner, target)
            point = reference.resolve(f"{moment}:{PLACE_ORDER.number}")
            result = await runner.cell(target, point, reference)
        return result.observed, result.matches, result.error

    async def _rerun(
        self, runner: Runner, target: Target
    ) -> tuple[dict[str, Any], bool, str | None]:
        """A run that never crashed, then, once its key has expired, a second run of the same
        workflow id (ALLOW_DUPLICATE: as if the first one's history were past its retention)."""
        reference = self.temporal_reference
        assert reference is not None
        first = await runner.cell(target, None, reference)
        if not first.matches:
            return first.observed, False, first.error or first.diff
        await asyncio.sleep(target.resume_after_s)
        queue = f"{first.workflow_id}-again"
        worker = await runner.start_worker(target, queue, queue)
        try:
            handle = await runner.client.start_workflow(
                target.workflow, target.input, id=first.workflow_id, task_queue=queue,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            )  # fmt: skip
            await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
        finally:
            await self.procs.stop(worker)
        state = await runner.observe(first.workflow_id)  # as JSON, like the reference's
        return state, state == reference.observed, None
