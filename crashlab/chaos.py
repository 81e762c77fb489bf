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

import psycopg
from pydantic import BaseModel
from temporal_crashtest import Processes

from agent.outcome import ONE_RUN_COUNTS
from crashlab.chaos_runs import RETRY_S, ChaosRuns
from crashlab.engines import ChaosStart, engine_named
from crashlab.faults import ChaosFault, FaultInjector
from crashlab.invariants import Violation, check_runs
from crashlab.recovery import held_by, recovery_seconds, summary_ms
from crashlab.servers import LabPostgres, LabTemporal, stop_leftovers
from infra.config import PROJECT_ROOT, data_dir, env_str
from infra.db import connect_postgres, ensure_schema
from infra.errors import ConfigError, DatabaseUnavailable
from infra.reporting import say
from journal.crash_points import without_crash_at

STEP_PAUSE_MS = "5-60"  # unless set: the windows random kills land in (see the docstring)
PACE_WINDOW_S = 5.0  # the runs' pace is their work done over this last stretch
PROGRESS_EVERY_S = 2.0


@dataclass(kw_only=True, frozen=True)
class ChaosOptions:
    engine: str  # a name in crashlab.engines.ENGINES
    design: str  # one of the engine's designs
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
    process_restarts: int  # of a process that was at work
    failed_starts: int = 0  # processes that died before they were at work (a fault at start)
    fault_times_s: list[float] = []  # when each fault fell, since the start
    completion_times_s: list[float] = []  # when each run was seen completed, since the start

    @property
    def ok(self) -> bool:
        return not self.violations and self.completed == self.runs


@dataclass(frozen=True)
class LabServers:
    """Where a chaos run's servers are; `postgres` and `temporal` are the lab's own (None: one
    the environment names, which the lab may not restart)."""

    postgres: LabPostgres | None
    temporal: LabTemporal | None
    db_url: str
    address: str | None  # Temporal's, for the Temporal engine


@dataclass(kw_only=True, frozen=True)
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

    def engine_start(self) -> ChaosStart:
        """What the engine starts its fleet and runs with."""
        return ChaosStart(
            procs=self.procs,
            workers=self.opts.workers,
            design=self.opts.design,
            tag=self.tag,
            db_url=self.servers.db_url,
            address=self.servers.address,
        )


async def _servers(opts: ChaosOptions, folder: Path) -> LabServers:
    """The lab's own Postgres and (for Temporal) dev server, or the ones the environment names:
    those the lab may not restart."""
    given_db, given_temporal = env_str("DATABASE_URL"), env_str("TEMPORAL_ADDRESS")
    if given_db and opts.postgres_restarts:
        raise ConfigError("DATABASE_URL is set: the lab restarts only a Postgres it started")
    on_temporal = engine_named(opts.engine).on_temporal
    if given_temporal and opts.temporal_restarts and on_temporal:
        raise ConfigError("TEMPORAL_ADDRESS is set: the lab restarts only a server it started")
    postgres = None
    if given_db:
        db_url = given_db
    else:
        postgres = LabPostgres(folder)
        db_url = await postgres.start()
    if not on_temporal:
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
    runs: ChaosRuns,
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
    env.update(engine_named(opts.engine).chaos_env(opts.design, servers.address))
    procs = Processes(folder / "logs", env, cwd=PROJECT_ROOT)
    try:
        wall = time.time() - (time.monotonic() - started)
        return await _chaos(
            ChaosRun(
                opts=opts,
                tag=tag,
                servers=servers,
                procs=procs,
                progress=progress,
                started=started,
                started_wall=wall,
            )
        )
    finally:
        procs.kill_all()
        for server in (servers.temporal, servers.postgres):
            if server is not None:
                with contextlib.suppress(Exception):
                    await server.stop()


def _recoveries(
    injector: FaultInjector, procs: Processes, progress_at: dict[str, list[float]]
) -> list[float]:
    """After each worker kill that held runs, how long until every run it held moved again."""
    recoveries = []
    for kill in injector.injected:
        if kill.fault is ChaosFault.WORKER_KILL:
            held = held_by(procs.log(kill.log_name))
            if (seconds := recovery_seconds(kill, held, progress_at)) is not None:
                recoveries.append(seconds)
    return recoveries


async def _chaos(run: ChaosRun) -> ChaosReport:
    """Start the engine's fleet and runs, inject faults until every run completed (or the
    deadline), then check the invariants in Postgres and say how fast kills were recovered."""
    opts, tag, procs, started = run.opts, run.tag, run.procs, run.started
    db_url = run.servers.db_url
    run_ids = [f"{tag}-{i:04d}" for i in range(1, opts.runs + 1)]
    engine = engine_named(opts.engine)
    runs = await engine.chaos_runs(run.engine_start())
    fleet = runs.fleet
    budget = {
        ChaosFault.WORKER_KILL: opts.kills,
        ChaosFault.POSTGRES_RESTART: opts.postgres_restarts,
        ChaosFault.TEMPORAL_RESTART: opts.temporal_restarts if engine.on_temporal else 0,
    }
    injector = FaultInjector(
        rng=random.Random(opts.seed),
        budget=budget,
        fleet=fleet,
        postgres=run.servers.postgres,
        temporal=run.servers.temporal,
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
    runs.stop()
    violations += [Violation(run_id=r, what=f"failed: {why}") for r, why in runs.failed.items()]
    run.say("reading when each run made progress")
    recoveries = _recoveries(injector, procs, await runs.progress_times(run_ids))
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
        failed_starts=fleet.failed_starts,
        fault_times_s=[round(i.at - run.started_wall, 1) for i in injector.injected],
        completion_times_s=sorted(round(t, 1) for t in completed_at.values()),
    )
