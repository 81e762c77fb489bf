"""How cost grows as the work grows (`python -m bench --scale`; not part of `make test`).

Temporal: a step's median and p99, a recovery after a SIGKILL, and how late a 1 s workflow
timer fires, on a dev server holding ~0, ~5,000 and ~20,000 completed runs; and a step with 1,
50 and 500 runs in flight. The journal: a checkpoint save and a six-step run's load with
`agent_steps` holding ~10^4 and ~10^6 rows.

This machine drifts by more than the effects looked for, so every figure at a size is measured
against a baseline in the same minutes, sample by sample in turn: the filled server against an
empty one beside it (both the bench's own, SQLite files under `.data/bench-scale/`, the
project's tuning), each journal size against the others (databases of the bench's own, dropped
after). The history is filled with completed empty workflows, on the same file served with
SQLite's `synchronous=off` for speed, and measured with the server started again normally.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from pydantic import BaseModel
from temporal_crashtest import Processes
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from agent.data import Choice, OrderLine
from agent.steps import CHOOSE, STEPS
from bench.recovery import recovery_samples
from bench.stats import Figure
from bench.workflows import SleepWorkflow, StepsSpec, StepsWorkflow, noop
from crashlab.servers import LabTemporal
from infra.config import PROJECT_ROOT, data_dir
from infra.db import connect_postgres, ensure_database_url, ensure_schema
from infra.temporal_client import connect_temporal
from journal.crash_points import without_crash_at
from journal.engine import Design, Journal

FILL_AT_ONCE = 200
QUEUE = "bench-scale"
OUTPUT = Choice(lines=[OrderLine(item=i, quantity=2) for i in ("eggs", "rice", "oats", "coffee")])
Say = Callable[[str], None]


class Paired(BaseModel):
    """A figure at a size and the same figure, measured in turn with it, at the baseline."""

    here: Figure
    baseline: Figure

    @property
    def ratio(self) -> float:
        return self.here.median_ms / self.baseline.median_ms if self.baseline.median_ms else 0.0


class Level(BaseModel):
    completed_runs: int
    step: Paired  # per activity step: a 6-step workflow minus an empty one
    recovery: Paired  # a worker SIGKILLed in the order activity; a fresh one finishes the run
    timer_late: Paired  # how much later than asked a 1 s timer fired (server event times)
    database_mb: float


class InFlight(BaseModel):
    runs: int
    step: Figure  # each run's duration / its steps


class JournalAt(BaseModel):
    rows: int
    save: Paired  # a new step's checkpoint, against the smallest table
    load: Paired  # opening a six-step run: its whole journal, one query


class ScaleReport(BaseModel):
    history: list[Level]
    in_flight: list[InFlight]
    journal: list[JournalAt]


@dataclass
class Side:
    """One dev server of the bench's, with a client and the worker processes' supervisor."""

    server: LabTemporal
    procs: Processes
    client: Client | None = None

    async def start(self) -> None:
        await self.server.start()
        self.client = await connect_temporal(self.server.address)

    @property
    def c(self) -> Client:
        assert self.client is not None
        return self.client


def _worker(client: Client) -> Worker:
    return Worker(
        client,
        task_queue=QUEUE,
        workflows=[StepsWorkflow, SleepWorkflow],
        activities=[noop],
        max_concurrent_workflow_tasks=FILL_AT_ONCE,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )


async def _fill(client: Client, count: int, say: Say) -> None:
    """`count` more completed (empty) workflows."""
    limit = asyncio.Semaphore(FILL_AT_ONCE)
    done = 0

    async def one() -> None:
        nonlocal done
        async with limit:
            await client.execute_workflow(
                StepsWorkflow.run,
                StepsSpec(steps=0),
                id=f"fill-{uuid.uuid4().hex}",
                task_queue=QUEUE,
            )
        done += 1
        if done % 1000 == 0:
            say(f"  filled {done}/{count}")

    await asyncio.gather(*(one() for _ in range(count)))


async def _step_sample(client: Client) -> int:
    """One step's cost: a 6-step workflow minus an empty one, run back to back."""
    t0 = time.perf_counter_ns()
    await client.execute_workflow(
        StepsWorkflow.run, StepsSpec(steps=0), id=f"e-{uuid.uuid4().hex}", task_queue=QUEUE
    )
    t1 = time.perf_counter_ns()
    await client.execute_workflow(
        StepsWorkflow.run, StepsSpec(steps=len(STEPS)), id=f"s-{uuid.uuid4().hex}", task_queue=QUEUE
    )
    return max(0, (time.perf_counter_ns() - t1) - (t1 - t0)) // len(STEPS)


async def _timer_sample(client: Client) -> int:
    """TimerFired minus TimerStarted, from the server's own event times, minus the 1 s asked."""
    handle = await client.start_workflow(
        SleepWorkflow.run, 1.0, id=f"t-{uuid.uuid4().hex}", task_queue=QUEUE
    )
    await handle.result()
    at = {e.event_type: e.event_time.ToNanoseconds() for e in (await handle.fetch_history()).events}
    return max(
        0,
        at[EventType.EVENT_TYPE_TIMER_FIRED]
        - at[EventType.EVENT_TYPE_TIMER_STARTED]
        - 1_000_000_000,
    )


async def _in_turn(
    sides: tuple[Side, Side], n: int, sample: Callable[[Side], Awaitable[int]]
) -> Paired:
    """`n` samples of each side, taken in turn (baseline, here, baseline, ...)."""
    baseline: list[int] = []
    here: list[int] = []
    for _ in range(n):
        baseline.append(await sample(sides[0]))
        here.append(await sample(sides[1]))
    return Paired(here=Figure.of_ns(here), baseline=Figure.of_ns(baseline))


async def _in_flight(client: Client, runs: int) -> Figure:
    async def one() -> int:
        t0 = time.perf_counter_ns()
        await client.execute_workflow(
            StepsWorkflow.run,
            StepsSpec(steps=len(STEPS)),
            id=f"f-{uuid.uuid4().hex}",
            task_queue=QUEUE,
        )
        return time.perf_counter_ns() - t0

    samples = await asyncio.gather(*(one() for _ in range(runs)))
    return Figure.of_ns(list(samples), per=len(STEPS))


async def temporal_scale(
    levels: list[int], in_flight: list[int], n: int, recoveries: int, say: Say
) -> tuple[list[Level], list[InFlight]]:
    """A step, a recovery and a timer's lateness on a server whose history holds each of
    `levels` completed runs, each in turn with an empty server; then steps with runs in
    flight."""
    root = data_dir() / "bench-scale"
    shutil.rmtree(root, ignore_errors=True)  # the last scale run's servers
    empty, filled = (_side(root / name) for name in ("empty", "filled"))
    filler = LabTemporal(
        root / "filled", port=filled.server.port, extra_flags=("--sqlite-pragma", "synchronous=off")
    )
    results: list[Level] = []
    flights: list[InFlight] = []
    count = 0
    try:
        await empty.start()
        for level in levels:
            if level > count:
                say(f"filling the history to {level} completed runs")
                await filler.start()
                client = await connect_temporal(filler.address)
                async with _worker(client):
                    await _fill(client, level - count, say)
                await filler.stop()
                count = level
            await filled.start()
            say(f"measuring at {count} completed runs, in turn with an empty server")
            results.append(await _level(empty, filled, count, n, recoveries))
            await filled.server.stop()
        async with _worker(empty.c):
            for runs in in_flight:
                say(f"{runs} runs in flight")
                flights.append(InFlight(runs=runs, step=await _in_flight(empty.c, runs)))
    finally:
        for side in (empty, filled):
            side.procs.kill_all()
            await side.server.stop()
        await filler.stop()
    return results, flights


def _side(folder: Path) -> Side:
    """A server of its own in `folder`, with the processes its recoveries start."""
    folder.mkdir(parents=True)
    server = LabTemporal(folder)
    env = dict(
        without_crash_at(os.environ),
        DATABASE_URL=ensure_database_url(),
        TEMPORAL_ADDRESS=server.address,
    )
    return Side(server, Processes(folder / "logs", env, cwd=PROJECT_ROOT))


async def _level(empty: Side, filled: Side, count: int, n: int, recoveries: int) -> Level:
    """The figures at one level, `filled` (holding `count` completed runs) in turn with
    `empty`."""
    pair = (empty, filled)

    async def recovery(side: Side) -> int:
        return (await recovery_samples(side.c, side.procs, 1))[0]

    # The quiet figures first: the others leave work behind for the servers.
    rec = await _in_turn(pair, recoveries, recovery)
    async with _worker(empty.c), _worker(filled.c):
        late = await _in_turn(pair, n, lambda side: _timer_sample(side.c))
        step = await _in_turn(pair, n, lambda side: _step_sample(side.c))
    size = sum(p.stat().st_size for p in filled.server.folder.glob("temporal.db*"))
    return Level(
        completed_runs=count,
        step=step,
        recovery=rec,
        timer_late=late,
        database_mb=round(size / 2**20, 1),
    )


async def journal_scale(rows: list[int], n: int, say: Say) -> list[JournalAt]:
    """Save and load in a database per size, in turn, each against the smallest."""
    admin_url = ensure_database_url()
    names = [f"bench_scale_{uuid.uuid4().hex[:8]}" for _ in rows]
    async with await connect_postgres(admin_url) as admin:
        for name in names:
            await admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    conns: list[psycopg.AsyncConnection] = []
    try:
        for name, count in zip(names, rows, strict=True):
            conn = await connect_postgres(make_conninfo(admin_url, dbname=name))
            conns.append(conn)
            await ensure_schema(conn)
            say(f"journal: agent_steps at {count} rows")
            await _fill_steps(conn, count)
        saves, loads = await _journal_in_turn(conns, n)
    finally:
        for conn in conns:
            await conn.close()
        async with await connect_postgres(admin_url) as admin:
            for name in names:
                await admin.execute(
                    sql.SQL("drop database {} with (force)").format(sql.Identifier(name))
                )
    return [
        JournalAt(
            rows=count,
            save=Paired(here=Figure.of_ns(save), baseline=Figure.of_ns(saves[0])),
            load=Paired(here=Figure.of_ns(load), baseline=Figure.of_ns(loads[0])),
        )
        for count, save, load in zip(rows, saves, loads, strict=True)
    ]


async def _fill_steps(conn: psycopg.AsyncConnection, count: int) -> None:
    """About `count` rows: runs of six steps, as the agent leaves them."""
    await conn.execute(
        "insert into agent_steps (run_id, step, name, output)"
        " select 'fill-' || r, s, 'choose', %s::jsonb"
        " from generate_series(1, %s) r, generate_series(1, %s) s",
        (OUTPUT.model_dump_json(), count // len(STEPS), len(STEPS)),
    )
    await conn.execute("analyze agent_steps")


async def _output(_: object) -> Choice:
    return OUTPUT


async def _journal_in_turn(
    conns: list[psycopg.AsyncConnection], n: int
) -> tuple[list[list[int]], list[list[int]]]:
    """Checkpoint saves, then six-step loads, one per database in turn."""
    runs = [f"bench-scale-{uuid.uuid4().hex[:8]}" for _ in conns]
    journals = [
        await Journal.open(conn, run_id, Design.DURABLE, "bench")
        for conn, run_id in zip(conns, runs, strict=True)
    ]
    saves: list[list[int]] = [[] for _ in conns]
    for i in range(1, n + 1):
        spec = replace(CHOOSE, number=i)
        for journal, samples in zip(journals, saves, strict=True):
            t0 = time.perf_counter_ns()
            await journal.step(spec, _output)
            samples.append(time.perf_counter_ns() - t0)
    six = [f"{run}-six" for run in runs]
    for conn, run_id in zip(conns, six, strict=True):  # a run as the agent leaves it
        journal = await Journal.open(conn, run_id, Design.DURABLE, "bench")
        for step in STEPS:
            await journal.step(replace(CHOOSE, number=step.number), _output)
        await journal.release()
    loads: list[list[int]] = [[] for _ in conns]
    for _ in range(min(n, 500)):
        for conn, run_id, samples in zip(conns, six, loads, strict=True):
            t0 = time.perf_counter_ns()
            opened = await Journal.open(conn, run_id, Design.DURABLE, "bench")
            samples.append(time.perf_counter_ns() - t0)
            await opened.release()
    for journal in journals:
        await journal.release()
    return saves, loads


def _pair(p: Paired, digits: int) -> str:
    return (
        f"{p.here.median_ms:.{digits}f} / {p.here.p99_ms:.{digits}f}  "
        f"(x{p.ratio:.2f} of {p.baseline.median_ms:.{digits}f})"
    )


def table(report: ScaleReport) -> str:
    lines = [
        "Temporal, by completed runs in the server's history: median / p99 ms, and the",
        "median's ratio to an empty server measured in turn with it:",
    ]
    for lv in report.history:
        lines.append(f"  {lv.completed_runs:>6} runs ({lv.database_mb:.0f} MB):")
        lines.append(f"    step            {_pair(lv.step, 1)}")
        lines.append(f"    recovery        {_pair(lv.recovery, 0)}")
        lines.append(f"    1 s timer late  {_pair(lv.timer_late, 1)}")
    lines.append("Temporal, by runs in flight at once (ms per step, median / p99):")
    for f in report.in_flight:
        lines.append(f"  {f.runs:>6} {f.step.median_ms:9.1f} / {f.step.p99_ms:.1f}")
    lines.append("Journal, by rows in agent_steps (ms, median / p99, ratio to the smallest):")
    for j in report.journal:
        lines.append(f"  {j.rows:>8}  save {_pair(j.save, 3)}   load {_pair(j.load, 3)}")
    return "\n".join(lines)


def flat_figures(report: ScaleReport) -> dict[str, BaseModel]:
    """The report as `python -m bench --json` writes figures: one name, one figure."""
    figures: dict[str, BaseModel] = {}
    for lv in report.history:
        at = f"@ {lv.completed_runs} completed runs"
        for name, pair in (
            ("temporal step", lv.step),
            ("recovery", lv.recovery),
            ("1 s timer, lateness", lv.timer_late),
        ):
            figures[f"{name} {at}"] = pair.here
            figures[f"{name} {at}, empty server in turn"] = pair.baseline
    for f in report.in_flight:
        figures[f"temporal step @ {f.runs} runs in flight"] = f.step
    for j in report.journal:
        figures[f"journal checkpoint save @ {j.rows} rows"] = j.save.here
        figures[f"journal load @ {j.rows} rows"] = j.load.here
    return figures
