"""Running the crash matrix's cells: a fresh run, a real process SIGKILLed at the cell's crash
point, a fresh process that resumes the run, and the final state read back from Postgres.

Journal cells run `python -m journal`, which keeps its own crash lines. DBOS cells run `python -m
crashlab.dbos_crash` (the agent on DBOS, with the lab's hook around its step functions) to the
kill, then `python -m dbos_agent`, which recovers the run as a DBOS application does when it
starts (its executor id: the run's own, so a process recovers no other cell's). Temporal cells are
crashtest cells, through its one call (`run_crash_test`), a crash test per key strategy: the
grocery worker is SIGKILLed from outside, by crashtest's interceptor. The re-run row is the
lab's own: a worker process and two runs of the same workflow id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psycopg import sql
from psycopg_pool import AsyncConnectionPool
from temporal_crashtest import Cell, CrashTestOptions, Processes, Target, Version, run_crash_test
from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy

from agent.data import EXAMPLE_WEEK, GroceryRequest
from agent.grocer import Grocer, GrocerClient
from agent.outcome import ONE_RUN_COUNTS, final_state, read_run_state
from agent.steps import PLACE_ORDER, STEP_NAMES
from crashlab.cells import (
    GROCER_ROWS,
    KEY_EXPIRY,
    RERUN_KEY_EXPIRY,
    RESET,
    RESET_KEY_EXPIRY,
    UNCHECKED,
    MatrixCell,
    MatrixResult,
)
from crashlab.engines import engine_named
from crashlab.servers import LabGrocer
from infra.config import PROJECT_ROOT, data_dir
from infra.db import connect_postgres, ensure_database_url, ensure_schema, open_pool
from infra.temporal_client import connect_temporal
from infra.temporal_server import ensure_temporal_address
from journal.crash_points import without_crash_at
from workflows.grocery import GroceryAgentWorkflow

HOUSEHOLD = "household-1"
PROCESS_TIMEOUT_S = 60
RESULT_TIMEOUT_S = 90
KEY_TTL_S = 1.0  # the lab's grocer forgets an idempotency key after this
# The agent's data converter, named for the crash tool's worker processes.
DATA_CONVERTER = "temporalio.contrib.pydantic:pydantic_data_converter"


class CellFailed(Exception):
    """The cell could not be run as designed (not: the design failed, which is a result)."""


class ResumeFailed(CellFailed):
    """The process that resumed the run ended in an error (a deploy's blocked run, for one)."""


@dataclass(frozen=True)
class Deploy:
    """The releases a deploy cell's run is killed in and resumed in (`agent.releases`)."""

    before: str
    after: str


def grocery_target(key_strategy: str, **env: str) -> Target:
    """The grocery agent as crashtest sees it: `worker.py`'s factory, with this key strategy
    (and `env` for its workers)."""
    return Target(
        old=Version("worker:build_worker"),
        workflow="GroceryAgentWorkflow",
        input=GroceryRequest(household=HOUSEHOLD, week=EXAMPLE_WEEK).model_dump(),
        data_converter=DATA_CONVERTER,
        env={"KEY_STRATEGY": key_strategy, **env},
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
    return [
        "-m", "temporal_crashtest.worker",
        "--worker", "worker:build_worker",
        "--task-queue", task_queue,
        "--data-converter", DATA_CONVERTER,
        "--crash-at", crash_at,
    ]  # fmt: skip


def counts(state: dict[str, Any]) -> tuple[int, int, int]:
    """(model calls, orders, emails) of a final state (`RunState.comparable()`)."""
    return state["model_calls"], len(state["orders"]), len(state["emails"])


def _result(
    cell: MatrixCell, state: dict[str, Any] | None, matches: bool, error: str | None, seconds: float
) -> MatrixResult:
    calls, orders, emails = counts(state) if state else (0, 0, 0)
    return MatrixResult(
        engine=cell.engine,
        design=cell.design,
        crash_at=cell.crash_at,
        model_calls=calls,
        orders=orders,
        emails=emails,
        matches_no_crash=error is None and matches,
        expected=cell.expected_match,
        seconds=round(seconds, 2),
        error=error,
    )


def _crash_at(cell: MatrixCell) -> str:
    """The crashtest point of a Temporal cell of the matrix. The matrix names a step by its
    number (`agent.steps`), crashtest by its place in the run or its activity name: the name,
    since the workflow runs a step the others do not (the price check, before the order)."""
    if cell.crash_at in (RESET, RESET_KEY_EXPIRY):
        return f"reset:{PLACE_ORDER.name}"
    if cell.crash_at == KEY_EXPIRY:
        return f"after-effect:{PLACE_ORDER.name}"
    moment, _, number = cell.crash_at.partition(":")
    if number.isdigit():
        return f"{moment}:{STEP_NAMES[int(number) - 1]}"
    return cell.crash_at


def named_point(crashed: Cell) -> str:
    """A crashtest cell's point by its activity's name (crashtest numbers it by position)."""
    return f"{crashed.crash_at.partition(':')[0]}:{crashed.activity}"


Progress = Callable[[MatrixResult], None]


@dataclass(kw_only=True)
class Lab:
    """What the cells share: the processes of the journal cells (and of the lab's grocer and
    re-runs), the database, Temporal's address and a client on it, where logs go."""

    procs: Processes
    pool: AsyncConnectionPool
    log_dir: Path
    db_url: str
    address: str | None = None  # Temporal's, for the Temporal cells
    client: Client | None = None
    jobs: int = 4  # crash points at once, in each crash test
    references: dict[str, dict[str, Any]] = field(default_factory=dict)  # by engine
    grocer: LabGrocer | None = None  # for the grocer rows, started on first use
    _grocer_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    # --- the journal and DBOS: a process per run -------------------------------------------

    async def reference(self, engine: str) -> None:
        """The final state of a run that never crashed, on the journal or on DBOS, which every
        cell of that engine is compared with (DBOS's also makes its tables, before cells run at
        once)."""
        design = engine_named(engine).default_design
        run_id = f"lab-reference-{engine}-{uuid.uuid4().hex[:8]}"
        cell = MatrixCell(engine=engine, design=design, crash_at="none")
        self.references[engine] = await self.process_state(cell, run_id)

    async def run_process_cell(self, cell: MatrixCell) -> MatrixResult:
        """A journal or DBOS cell: a process killed at the point, a fresh one that resumes."""
        started = time.monotonic()
        point = cell.crash_at.replace(":", "")
        run_id = f"lab-{cell.engine}-{cell.design}-{point}-{uuid.uuid4().hex[:8]}"
        try:
            state = await self.process_state(cell, run_id)
            matches = state == self.references[cell.engine]
            return _result(cell, state, matches, None, time.monotonic() - started)
        except Exception as err:  # one broken cell is reported, and the matrix goes on
            error = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
            return _result(
                cell, await final_state(run_id), False, error, time.monotonic() - started
            )

    async def process_state(
        self, cell: MatrixCell, run_id: str, deploy: Deploy | None = None
    ) -> dict[str, Any]:
        """The cell's run: killed at its point, then resumed; with `deploy`, killed in a process
        of one release and resumed in one of another (the deploy matrix). A resumed process
        that fails is ResumeFailed, with its last line."""
        args = ["run", "--run-id", run_id, "--design", cell.design, "--household", HOUSEHOLD]
        make = engine_named(cell.engine).process_run
        if make is None:
            raise CellFailed(f"{cell.engine} runs its cells as crash tests, not as processes")
        run = make(args, run_id)
        crashing, resuming = run.crashing, run.resuming
        if deploy is not None:
            crashing = [*crashing, "--release", deploy.before]
            resuming = [*resuming, "--release", deploy.after]
        try:
            if cell.crash_at != "none":
                code = await self.procs.run(
                    f"{run_id}-crash", crashing, PROCESS_TIMEOUT_S, CRASH_AT=cell.crash_at
                )
                if code != -signal.SIGKILL:
                    raise CellFailed(f"the crashing process exited with {code}, not by SIGKILL")
            code = await self.procs.run(run_id, resuming, PROCESS_TIMEOUT_S)
            if code != 0:
                last = self.procs.last_line(run_id)
                raise ResumeFailed(f"the resumed process exited with {code}: {last}")
            async with self.pool.connection() as conn:
                return (await read_run_state(conn, run_id)).comparable()
        finally:
            if run.schema is not None:
                async with self.pool.connection() as conn:
                    drop = "drop schema if exists {} cascade"
                    await conn.execute(sql.SQL(drop).format(sql.Identifier(run.schema)))

    # --- Temporal ------------------------------------------------------------------------

    async def run_temporal(self, cells: list[MatrixCell], progress: Progress) -> list[MatrixResult]:
        """One crash test per key strategy (and per grocer design), all at once: each design's
        cells are its crash points; its reference, the `none` row."""
        groups: dict[tuple[str, bool], list[MatrixCell]] = {}
        reruns = []
        for cell in cells:
            if cell.crash_at == RERUN_KEY_EXPIRY:
                reruns.append(cell)
            else:
                groups.setdefault((cell.design, cell.crash_at in GROCER_ROWS), []).append(cell)
        work = [
            self._crash_test(group, at_grocer, progress) for (_, at_grocer), group in groups.items()
        ]
        work += [self._rerun(cell, progress) for cell in reruns]
        return [r for results in await asyncio.gather(*work) for r in results]

    async def _crash_test(
        self, cells: list[MatrixCell], at_grocer: bool, progress: Progress
    ) -> list[MatrixResult]:
        started = time.monotonic()
        design = cells[0].design
        by_point = {_crash_at(c): c for c in cells if c.crash_at != "none"}
        observe: Callable[[str], Awaitable[dict[str, Any]]] = final_state
        env = {"DATABASE_URL": self.db_url}
        resume_after_s = 0.0
        if at_grocer:
            grocer = await self._grocer()
            env.update(grocer_env(grocer, checked=design != UNCHECKED))
            observe = self._observer(grocer)
            design, resume_after_s = "workflow", KEY_TTL_S
        target = grocery_target(design, **env)

        def cell_done(_done: int, _total: int, cell: Cell) -> None:
            progress(self._cell_result(by_point[named_point(cell)], cell))

        options = CrashTestOptions(
            points=list(by_point),
            jobs=self.jobs,
            address=self.address,
            deadline_s=RESULT_TIMEOUT_S,
            resume_after_s=resume_after_s,
            logs=self.log_dir / f"crashtest-{cells[0].design}",
            progress=cell_done,
        )
        try:
            report = await run_crash_test(target, observe, options)
        except Exception as err:
            error = f"{type(err).__name__}: {err}"
            results = [_result(c, None, False, error, time.monotonic() - started) for c in cells]
            for result in results:
                progress(result)
            return results
        labels = tuple(report.activities)
        if tuple(label for label in labels if label in STEP_NAMES) != STEP_NAMES:
            raise CellFailed(f"the workflow ran {labels}, not the agent's steps {STEP_NAMES}")
        results = [self._cell_result(by_point[named_point(c)], c) for c in report.cells]
        for none in (c for c in cells if c.crash_at == "none"):  # the reference is that row
            state = report.reference
            result = _result(none, state, counts(state) == ONE_RUN_COUNTS, None, report.seconds)
            progress(result)
            results.append(result)
        return results

    @staticmethod
    def _cell_result(cell: MatrixCell, crashed: Cell) -> MatrixResult:
        return _result(cell, crashed.observed, crashed.matches, crashed.error, crashed.seconds)

    async def _grocer(self) -> LabGrocer:
        async with self._grocer_lock:
            if self.grocer is None:
                self.grocer = LabGrocer(self.procs, KEY_TTL_S)
                await self.grocer.start()
            return self.grocer

    def _observer(self, grocer: LabGrocer) -> Callable[[str], Awaitable[dict[str, Any]]]:
        """The final state, with the orders the lab's grocer holds under the run's reference.
        crashtest calls it in a thread with an event loop of its own: it opens a connection of
        its own (the lab's pool belongs to the lab's loop; its lock, taken from several loops
        at once, raised "bound to a different event loop")."""

        async def observe(workflow_id: str) -> dict[str, Any]:
            async with Grocer(GrocerClient(grocer.url, grocer.api_key), KEY_TTL_S) as at_grocer:
                async with await connect_postgres(self.db_url) as conn:
                    return (await read_run_state(conn, workflow_id, at_grocer)).comparable()

        return observe

    async def _rerun(self, cell: MatrixCell, progress: Progress) -> list[MatrixResult]:
        """A run that never crashed, then, once its key has expired, a second run of the same
        workflow id (ALLOW_DUPLICATE: as if the first one's history were past its retention,
        or as `starter.py --again` does after a failed run): the state must not change."""
        started = time.monotonic()
        assert self.client is not None and self.address is not None
        grocer = await self._grocer()
        observe = self._observer(grocer)
        workflow_id = f"lab-rerun-{cell.design}-{uuid.uuid4().hex[:8]}"
        env = {
            "DATABASE_URL": self.db_url,
            "TEMPORAL_ADDRESS": self.address,
            "TASK_QUEUE": workflow_id,
            "KEY_STRATEGY": "workflow",
            **grocer_env(grocer, checked=cell.design != UNCHECKED),
        }
        worker = await self.procs.start(f"{workflow_id}-worker", ["worker.py"], **env)
        request = GroceryRequest(household=HOUSEHOLD, week=EXAMPLE_WEEK)
        error, states = None, []
        try:
            for _ in range(2):
                handle = await self.client.start_workflow(
                    GroceryAgentWorkflow.run,
                    request,
                    id=workflow_id,
                    task_queue=workflow_id,
                    id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                )
                await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
                states.append(json.loads(json.dumps(await observe(workflow_id))))
                await asyncio.sleep(KEY_TTL_S)  # the grocer forgets the key
        except Exception as err:
            error = f"{type(err).__name__}: {err}"
        finally:
            await self.procs.stop(worker)
        if not states:
            states.append(await observe(workflow_id))
        once, twice = states[0], states[-1]
        matches = len(states) == 2 and twice == once and counts(once) == ONE_RUN_COUNTS
        result = _result(cell, twice, matches, error, time.monotonic() - started)
        progress(result)
        return [result]


@contextlib.asynccontextmanager
async def opened_lab(
    name: str, *, jobs: int, on_temporal: bool, log_dir: Path | None = None
) -> AsyncIterator[Lab]:
    """A Lab on Postgres (its schema made) and, if `on_temporal`, on Temporal; its processes'
    logs under `log_dir` (default .data/crashlab/NAME-<time>); every process killed after."""
    db_url = ensure_database_url()
    async with await connect_postgres(db_url) as conn:
        await ensure_schema(conn)
    env = dict(without_crash_at(os.environ), DATABASE_URL=db_url)
    log_dir = log_dir or data_dir() / "crashlab" / f"{name}{time.strftime('%Y%m%d-%H%M%S')}"
    procs = Processes(log_dir, env, cwd=PROJECT_ROOT)
    pool = await open_pool(db_url, max_size=4)
    try:
        lab = Lab(procs=procs, pool=pool, log_dir=log_dir, db_url=db_url, jobs=max(2, jobs // 2))
        if on_temporal:
            lab.address = ensure_temporal_address()
            lab.client = await connect_temporal(lab.address)
        yield lab
    finally:
        procs.kill_all()
        await pool.close()


def grocer_env(grocer: LabGrocer, *, checked: bool) -> dict[str, str]:
    """A worker's settings for orders at the lab's grocer, with the effect check on or off."""
    return {
        "ORDER_BACKEND": "grocer",
        "GROCER_URL": grocer.url,
        "GROCER_API_KEY": grocer.api_key,
        "GROCER_KEY_TTL_S": str(KEY_TTL_S),
        "ORDER_EFFECT_CHECK": "on" if checked else "off",
    }
