"""Chaos under load: many runs in flight on several processes, while a seeded injector SIGKILLs
workers at random moments and restarts Postgres and Temporal abruptly. At the end the invariants
are checked straight from Postgres (and Temporal, for the runs' status).

Temporal: W `worker.py` processes on one task queue, N workflows started at once. Journal: W
`python -m journal resume --until-done` processes, N runs registered for them. DBOS: W `python -m
dbos_agent serve` processes (an executor id each), N runs enqueued on DBOS's queue. Each process
is restarted when it dies, as a supervisor would. STEP_PAUSE_MS pauses every step before its
work and again between its effect and its record, so that kills land in that window too;
without it the weak designs would look safe by luck. The lab runs its own Postgres and Temporal
server in `.data/chaos/` (wiped at the start of each chaos run), so it kills only what it
started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psycopg
from dbos import DBOSClient, EnqueueOptions
from pydantic import BaseModel
from temporal_crashtest import Processes
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError

from agent.data import EXAMPLE_WEEK, GroceryRequest
from agent.outcome import ONE_RUN_COUNTS
from crashlab.faults import ChaosFault, FaultInjector
from crashlab.fleet import SLOT, Fleet
from crashlab.invariants import Violation, check_runs
from crashlab.recovery import held_by, recovery_seconds, summary_ms
from crashlab.servers import LabPostgres, LabTemporal, stop_leftovers
from dbos_agent.__main__ import READY_LINE as DBOS_READY
from dbos_agent.__main__ import SCHEMA as DBOS_SCHEMA
from dbos_agent.agent import QUEUE_NAME, WORKFLOW_NAME, DBOSRequest, KeyDesign
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
DBOS_STUCK_AFTER_S = "5"  # unless set: a DBOS run with no step for this long is stuck
JOURNAL_CONCURRENCY = 10  # runs at once in each journal process
RETRY_S = 0.5  # how soon to ask again a server that is restarting
PACE_WINDOW_S = 5.0  # the runs' pace is their work done over this last stretch
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
    fault_times_s: list[float] = []  # when each fault fell, since the start
    completion_times_s: list[float] = []  # when each run was seen completed, since the start

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


async def _runs_where(db_url: str, query: Any, run_ids: list[str], before: set[str]) -> set[str]:
    """The run ids `query` (one parameter: the run ids) answers; `before` while Postgres is
    restarting."""
    with contextlib.suppress(psycopg.Error, DatabaseUnavailable, OSError):
        async with await connect_postgres(db_url) as conn:
            rows = await conn.execute(query, (run_ids,))
            return {row[0] for row in await rows.fetchall()}
    return before


async def _times(db_url: str, query: Any, run_ids: list[str]) -> dict[str, list[float]]:
    """(run id, seconds since the epoch) rows of `query`, by run."""
    async with await connect_postgres(db_url) as conn:
        rows = await conn.execute(query, (run_ids,))
        times: dict[str, list[float]] = {}
        for run_id, at in await rows.fetchall():
            if at is not None:
                times.setdefault(run_id, []).append(float(at))
    return times


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
        query = "select run_id from agent_runs where run_id = any(%s) and status = 'completed'"
        self.done = await _runs_where(self.db_url, query, self.run_ids, self.done)
        return self.done

    async def progress_times(self, run_ids: list[str]) -> dict[str, list[float]]:
        """When each run saved a step (database time, seconds since the epoch)."""
        query = (
            "select run_id, extract(epoch from created_at)::float8 from agent_steps"
            " where run_id = any(%s)"
        )
        return await _times(self.db_url, query, run_ids)


class DBOSRuns:
    """N runs enqueued on DBOS's `grocery` queue, run by `fleet`'s `python -m dbos_agent serve`
    processes: each slot has an executor id of its own, kept across restarts, so a restarted
    process recovers the runs its predecessor held (as DBOS expects of a supervised fleet)."""

    def __init__(self, db_url: str, fleet: Fleet, design: str, procs: Processes) -> None:
        self.db_url = db_url
        self.fleet = fleet
        self.design = KeyDesign.parse(design)
        self.procs = procs
        self.run_ids: list[str] = []
        self.done: set[str] = set()

    async def start(self, run_ids: list[str]) -> None:
        self.run_ids = run_ids
        code = await self.procs.run("dbos-setup", ["-m", "dbos_agent", "setup"], 120)
        if code != 0:
            raise ConfigError(f"python -m dbos_agent setup: {self.procs.last_line('dbos-setup')}")
        client = DBOSClient(system_database_url=self.db_url, dbos_system_schema=DBOS_SCHEMA)
        try:
            for run_id, household in households(run_ids).items():
                options = EnqueueOptions(
                    workflow_name=WORKFLOW_NAME,
                    queue_name=QUEUE_NAME,
                    workflow_id=run_id,
                )
                request = DBOSRequest(household=household, design=self.design)
                await client.enqueue_async(options, request)
        finally:
            client.destroy()

    async def completed(self) -> set[str]:
        query = (
            f"select workflow_uuid from {DBOS_SCHEMA}.workflow_status"
            " where workflow_uuid = any(%s) and status = 'SUCCESS'"
        )
        self.done = await _runs_where(self.db_url, query, self.run_ids, self.done)
        return self.done

    async def progress_times(self, run_ids: list[str]) -> dict[str, list[float]]:
        """When each run's steps were recorded (database time, seconds since the epoch)."""
        query = (
            f"select workflow_uuid, completed_at_epoch_ms / 1000.0 from "
            f"{DBOS_SCHEMA}.operation_outputs where workflow_uuid = any(%s)"
        )
        return await _times(self.db_url, query, run_ids)


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
    started_wall: float  # time.time() at the start (the faults' times are wall clock)

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


async def work_done(db_url: str, run_ids: list[str]) -> float | None:
    """The share of the runs' work done, from their model calls (every engine records each one
    in Postgres; a run makes `ONE_RUN_COUNTS[0]`): None while Postgres is restarting."""
    with contextlib.suppress(psycopg.Error, DatabaseUnavailable, OSError):
        async with await connect_postgres(db_url) as conn:
            row = await (
                await conn.execute(
                    "select count(*) from model_calls where run_id = any(%s)", (run_ids,)
                )
            ).fetchone()
            calls = row[0] if row else 0
            return min(1.0, calls / (len(run_ids) * ONE_RUN_COUNTS[0]))
    return None


async def _drive(
    runs: Engine,
    injector: FaultInjector,
    run_ids: list[str],
    db_url: str,
    deadline: float,
    progress: Callable[[str], None],
    started: float,
) -> dict[str, float]:
    """Let the runs go and the faults fall, until every run completed or the deadline passed;
    when each run was first seen completed (seconds since the start)."""
    total = len(run_ids)
    done: dict[str, float] = {}
    share = 0.0
    # (when, share of the work done) over the last PACE_WINDOW_S: the pace is the recent one
    # (a run's first seconds, processes starting and the first steps, are slower than the rest)
    recent: deque[tuple[float, float]] = deque()

    def keep_going() -> bool:
        return len(done) < total and time.monotonic() < deadline

    def seconds_left() -> float | None:
        """At the pace of the last PACE_WINDOW_S of work (None until some is done)."""
        if len(recent) < 2 or recent[-1][1] <= recent[0][1]:
            return None
        (then, before), (now, after) = recent[0], recent[-1]
        return (1 - after) * (now - then) / (after - before)

    faults = asyncio.create_task(injector.run(keep_going, seconds_left))
    said = 0.0
    while keep_going():
        now = time.monotonic() - started
        for run_id in await runs.completed():
            done.setdefault(run_id, now)
        share = await work_done(db_url, run_ids) or share
        recent.append((time.monotonic(), share))
        while recent[-1][0] - recent[0][0] > PACE_WINDOW_S:
            recent.popleft()
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
    now = time.monotonic() - started
    for run_id in await runs.completed():
        done.setdefault(run_id, now)
    return done


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
    if opts.engine == "dbos":  # a paused step takes at most ~0.2 s here
        env.setdefault("DBOS_STUCK_AFTER_S", DBOS_STUCK_AFTER_S)
    procs = Processes(folder / "logs", env, cwd=PROJECT_ROOT)
    try:
        wall = time.time() - (time.monotonic() - started)
        return await _chaos(ChaosRun(opts, tag, servers, procs, progress, started, wall))
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
    runs: TemporalRuns | JournalRuns | DBOSRuns
    if opts.engine == "dbos":
        # dbos_agent serve, with the lab's pauses around the step functions (STEP_PAUSE_MS)
        serve = ["-m", "crashlab.dbos_crash", "serve", "--executor-id", f"{tag}-{SLOT}"]
        fleet = Fleet(procs, "agent", serve, opts.workers, ready_line=DBOS_READY)
        runs = DBOSRuns(db_url, fleet, opts.design, procs)
    elif opts.engine == "temporal":
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
    completed_at = await _drive(
        runs, injector, run_ids, db_url, started + opts.deadline_s, run.progress, started
    )
    completed = set(completed_at)
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
        fault_times_s=[round(i.at - run.started_wall, 1) for i in injector.injected],
        completion_times_s=sorted(round(t, 1) for t in completed_at.values()),
    )
