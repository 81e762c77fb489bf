"""Chaos under load: many runs in flight on several processes, while a seeded injector SIGKILLs
workers at random moments and restarts Postgres and Temporal abruptly. At the end the invariants
are checked straight from Postgres (and Temporal, for the runs' status).

Temporal: W `worker.py` processes on one task queue, N workflows started at once. Journal: W
`python -m journal resume --until-done` processes, N runs registered for them. Each process is
restarted when it dies, as a supervisor would. STEP_PAUSE_MS pauses every step before its work
and again between its effect and its record, so that kills land in that window too; without it
the weak designs would look safe by luck. The lab runs its own Postgres and Temporal server in
`.data/chaos/` (wiped at the start of each chaos run), so it kills only what it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psycopg
from pydantic import BaseModel
from temporal_crashtest import Processes
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError

from agent.data import EXAMPLE_WEEK, GroceryRequest
from crashlab.faults import ChaosFault, FaultInjector
from crashlab.fleet import Fleet
from crashlab.invariants import Violation, check_runs
from crashlab.recovery import held_by, recovery_seconds, summary_ms
from crashlab.servers import LabPostgres, LabTemporal, stop_leftovers
from infra.config import PROJECT_ROOT, data_dir, env_str
from infra.db import connect_postgres, ensure_schema
from infra.errors import ConfigError, DatabaseUnavailable
from infra.reporting import say
from infra.temporal_client import connect_temporal
from journal.crash_points import without_crash_at
from journal.engine import Design, register_runs
from journal.resume import READY_LINE as RESUME_READY
from workflows.grocery import GroceryAgentWorkflow

STEP_PAUSE_MS = "5-60"  # unless set: the windows random kills land in (see the docstring)
JOURNAL_CONCURRENCY = 10  # runs at once in each journal process
RETRY_S = 0.5  # how soon to ask again a server that is restarting
PROGRESS_EVERY_S = 2.0
HISTORIES_AT_ONCE = 10


@dataclass(frozen=True)
class ChaosOptions:
    engine: str  # temporal | journal
    design: str  # a Temporal key strategy, or a journal design
    runs: int
    workers: int
    kills: int
    postgres_restarts: int
    temporal_restarts: int
    seed: int
    deadline_s: float


class ChaosReport(BaseModel):
    engine: str
    design: str
    runs: int
    completed: int
    violations: list[Violation]
    faults: dict[str, int]
    recovery_ms: dict[str, float] | None  # after a worker kill; None if no kill held a run
    seconds: float
    seed: int
    workers: int
    kills_that_held_runs: int
    process_restarts: int

    @property
    def ok(self) -> bool:
        return not self.violations and self.completed == self.runs


class Engine(Protocol):
    fleet: Fleet

    async def start(self, run_ids: list[str]) -> None: ...

    async def completed(self) -> set[str]: ...

    async def progress_times(self, run_ids: list[str]) -> dict[str, list[float]]: ...


def households(run_ids: list[str]) -> dict[str, str]:
    """Each run orders for a household of its own, so its email goes to its own address."""
    return {run_id: f"h{run_id.rsplit('-', 1)[1]}" for run_id in run_ids}


class TemporalRuns:
    """N workflows on `fleet`'s task queue; a result waiter per run that outlives server
    restarts."""

    def __init__(self, client: Client, fleet: Fleet, queue: str) -> None:
        self.client = client
        self.fleet = fleet
        self.queue = queue
        self.done: set[str] = set()
        self.failed: dict[str, str] = {}
        self._waiters: list[asyncio.Task[None]] = []

    async def start(self, run_ids: list[str]) -> None:
        people = households(run_ids)
        await asyncio.gather(*(self._start_one(run_id, people[run_id]) for run_id in run_ids))
        self._waiters = [asyncio.create_task(self._wait(run_id)) for run_id in run_ids]

    async def _start_one(self, run_id: str, household: str) -> None:
        while True:
            try:
                await self.client.start_workflow(
                    GroceryAgentWorkflow.run,
                    GroceryRequest(household=household, week=EXAMPLE_WEEK),
                    id=run_id,
                    task_queue=self.queue,
                )
                return
            except WorkflowAlreadyStartedError:  # an earlier try got through; its answer did not
                return
            except RPCError:
                await asyncio.sleep(RETRY_S)

    async def _wait(self, run_id: str) -> None:
        handle = self.client.get_workflow_handle(run_id)
        while True:
            try:
                await handle.result()
                self.done.add(run_id)
                return
            except WorkflowFailureError as err:
                self.failed[run_id] = str(err.cause or err)
                return
            except RPCError:  # the server is restarting
                await asyncio.sleep(RETRY_S)

    async def completed(self) -> set[str]:
        return self.done

    async def progress_times(self, run_ids: list[str]) -> dict[str, list[float]]:
        """When each run completed an activity (server time, seconds since the epoch)."""
        limit = asyncio.Semaphore(HISTORIES_AT_ONCE)

        async def completions(run_id: str) -> list[float]:
            async with limit:
                history = await self.client.get_workflow_handle(run_id).fetch_history()
            return [
                e.event_time.ToNanoseconds() / 1e9
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
            ]

        found = await asyncio.gather(*(completions(run_id) for run_id in run_ids))
        return dict(zip(run_ids, found, strict=True))

    def stop(self) -> None:
        for waiter in self._waiters:
            waiter.cancel()


class JournalRuns:
    """N runs registered in the journal, run by `fleet`'s `resume` processes."""

    def __init__(self, db_url: str, fleet: Fleet, design: Design) -> None:
        self.db_url = db_url
        self.fleet = fleet
        self.design = design
        self.run_ids: list[str] = []
        self.done: set[str] = set()

    async def start(self, run_ids: list[str]) -> None:
        self.run_ids = run_ids
        async with await connect_postgres(self.db_url) as conn:
            await register_runs(conn, self.design, households(run_ids))

    async def completed(self) -> set[str]:
        with contextlib.suppress(psycopg.Error, DatabaseUnavailable, OSError):  # restarting
            async with await connect_postgres(self.db_url) as conn:
                rows = await conn.execute(
                    "select run_id from agent_runs where run_id = any(%s) and status = 'completed'",
                    (self.run_ids,),
                )
                self.done = {row[0] for row in await rows.fetchall()}
        return self.done

    async def progress_times(self, run_ids: list[str]) -> dict[str, list[float]]:
        """When each run saved a step (database time, seconds since the epoch)."""
        async with await connect_postgres(self.db_url) as conn:
            rows = await conn.execute(
                "select run_id, extract(epoch from created_at)::float8 from agent_steps"
                " where run_id = any(%s)",
                (run_ids,),
            )
            times: dict[str, list[float]] = {}
            for run_id, at in await rows.fetchall():
                times.setdefault(run_id, []).append(at)
        return times


def quiet_runtime() -> Runtime:
    """The lab restarts the server on purpose: its own client's retries meanwhile are expected,
    not news (the SDK logs each one as a warning)."""
    quiet = TelemetryFilter(core_level="ERROR", other_level="ERROR")
    return Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=quiet)))


@dataclass(frozen=True)
class LabServers:
    """Where a chaos run's servers are; `postgres` and `temporal` are the lab's own (None: one
    the environment names, which the lab may not restart)."""

    postgres: LabPostgres | None
    temporal: LabTemporal | None
    db_url: str
    address: str | None  # Temporal's, for the Temporal engine


@dataclass(frozen=True)
class ChaosRun:
    """One chaos run: its settings, its tag, its servers and processes, where it reports."""

    opts: ChaosOptions
    tag: str
    servers: LabServers
    procs: Processes
    progress: Callable[[str], None]
    started: float  # time.monotonic() at the start

    def say(self, text: str) -> None:
        self.progress(f"[{time.monotonic() - self.started:6.1f} s] {text}")


async def _servers(opts: ChaosOptions, folder: Path) -> LabServers:
    """The lab's own Postgres and (for Temporal) dev server, or the ones the environment names:
    those the lab may not restart."""
    given_db, given_temporal = env_str("DATABASE_URL"), env_str("TEMPORAL_ADDRESS")
    if given_db and opts.postgres_restarts:
        raise ConfigError("DATABASE_URL is set: the lab restarts only a Postgres it started")
    if given_temporal and opts.temporal_restarts and opts.engine == "temporal":
        raise ConfigError("TEMPORAL_ADDRESS is set: the lab restarts only a server it started")
    postgres = None
    if given_db:
        db_url = given_db
    else:
        postgres = LabPostgres(folder)
        db_url = await postgres.start()
    if opts.engine != "temporal":
        return LabServers(postgres, None, db_url, None)
    if given_temporal:
        return LabServers(postgres, None, db_url, given_temporal)
    temporal = LabTemporal(folder)
    try:
        return LabServers(postgres, temporal, db_url, await temporal.start())
    except BaseException:
        if postgres is not None:
            await postgres.stop()
        raise


async def _drive(
    runs: Engine,
    injector: FaultInjector,
    total: int,
    deadline: float,
    progress: Callable[[str], None],
    started: float,
) -> set[str]:
    """Let the runs go and the faults fall, until every run completed or the deadline passed."""
    done: set[str] = set()

    def keep_going() -> bool:
        return len(done) < total and time.monotonic() < deadline

    def seconds_left() -> float | None:
        """At the pace so far (None until a run has finished)."""
        if not done:
            return None
        return (total - len(done)) * (time.monotonic() - started) / len(done)

    faults = asyncio.create_task(injector.run(keep_going, seconds_left))
    said = 0.0
    while keep_going():
        done = set(await runs.completed())
        if time.monotonic() - said >= PROGRESS_EVERY_S:
            said = time.monotonic()
            counts = ", ".join(
                f"{f.value.replace('_', ' ')}s {injector.count(f)}/{injector.budget[f]}"
                for f in ChaosFault
            )
            progress(
                f"[{said - started:6.1f} s] {len(done)}/{total} completed; {counts}; "
                f"{runs.fleet.restarts} process restarts"
            )
        await asyncio.sleep(RETRY_S)
    await faults  # a fault under way finishes: its server is up again for the checks
    return set(await runs.completed())


async def run_chaos(opts: ChaosOptions, progress: Callable[[str], None] = say) -> ChaosReport:
    started = time.monotonic()
    tag = f"chaos-{uuid.uuid4().hex[:6]}"
    folder = data_dir() / "chaos"
    if folder.exists():
        await asyncio.to_thread(stop_leftovers, folder)
    shutil.rmtree(folder, ignore_errors=True)  # the last chaos run's servers and logs
    folder.mkdir(parents=True)
    servers = await _servers(opts, folder)
    where = f"Postgres {servers.db_url}" + (
        f", Temporal {servers.address}" if servers.address else ""
    )
    progress(
        f"{tag}: {opts.engine}/{opts.design}, {opts.runs} runs, {opts.workers} workers; {where}"
    )
    env = dict(without_crash_at(os.environ), DATABASE_URL=servers.db_url, TASK_QUEUE=tag)
    env.setdefault("STEP_PAUSE_MS", STEP_PAUSE_MS)
    if opts.engine == "temporal":
        env.update(TEMPORAL_ADDRESS=servers.address or "", KEY_STRATEGY=opts.design)
    procs = Processes(folder / "logs", env, cwd=PROJECT_ROOT)
    try:
        return await _chaos(ChaosRun(opts, tag, servers, procs, progress, started))
    finally:
        procs.kill_all()
        for server in (servers.temporal, servers.postgres):
            if server is not None:
                with contextlib.suppress(Exception):
                    await server.stop()


async def _chaos(run: ChaosRun) -> ChaosReport:
    opts, tag, procs, started = run.opts, run.tag, run.procs, run.started
    db_url, address = run.servers.db_url, run.servers.address
    run_ids = [f"{tag}-{i:04d}" for i in range(1, opts.runs + 1)]
    runs: TemporalRuns | JournalRuns
    if opts.engine == "temporal":
        fleet = Fleet(
            procs, "worker", ["-m", "crashlab.worker"], opts.workers, ready_line="worker ready"
        )
        runs = TemporalRuns(await connect_temporal(address, runtime=quiet_runtime()), fleet, tag)
    else:
        resume = ["-m", "journal", "resume", "--until-done"]
        fleet = Fleet(
            procs,
            "agent",
            [*resume, "--concurrency", str(JOURNAL_CONCURRENCY)],
            opts.workers,
            ready_line=RESUME_READY,
        )
        runs = JournalRuns(db_url, fleet, Design.parse(opts.design))
    budget = {
        ChaosFault.WORKER_KILL: opts.kills,
        ChaosFault.POSTGRES_RESTART: opts.postgres_restarts,
        ChaosFault.TEMPORAL_RESTART: opts.temporal_restarts if opts.engine == "temporal" else 0,
    }
    injector = FaultInjector(
        random.Random(opts.seed), budget, fleet, run.servers.postgres, run.servers.temporal
    )
    async with await connect_postgres(db_url) as conn:
        await ensure_schema(conn)
    await runs.start(run_ids)
    fleet.start()
    completed = await _drive(
        runs, injector, len(run_ids), started + opts.deadline_s, run.progress, started
    )
    run.say("stopping the workers")
    await fleet.stop()
    run.say("checking every run in Postgres")
    async with await connect_postgres(db_url) as conn:
        violations = await check_runs(conn, run_ids, completed, tag)
    if isinstance(runs, TemporalRuns):
        runs.stop()
        violations += [Violation(run_id=r, what=f"failed: {why}") for r, why in runs.failed.items()]
    run.say("reading when each run made progress")
    progress_at = await runs.progress_times(run_ids)
    recoveries = []
    for kill in injector.injected:
        if kill.fault is ChaosFault.WORKER_KILL:
            held = held_by(procs.log(kill.log_name))
            if (seconds := recovery_seconds(kill, held, progress_at)) is not None:
                recoveries.append(seconds)
    return ChaosReport(
        engine=opts.engine,
        design=opts.design,
        runs=opts.runs,
        completed=len(completed),
        violations=violations,
        faults={fault.value + "s": injector.count(fault) for fault in ChaosFault},
        recovery_ms=summary_ms(recoveries),
        seconds=round(time.monotonic() - started, 1),
        seed=opts.seed,
        workers=opts.workers,
        kills_that_held_runs=len(recoveries),
        process_restarts=fleet.restarts,
    )
