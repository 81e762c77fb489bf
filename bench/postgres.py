"""The journal's costs against the floor: a bare single-row INSERT commit on the same server.

Samples are interleaved (floor, save, seed method, floor, save, ...) so that noise from a shared
machine lands on every figure alike; the ratio to the floor is the trustworthy number.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import psycopg

from agent.data import Choice, OrderLine
from agent.steps import CHOOSE
from bench.stats import Figure
from journal.engine import Design, Journal

# The output every benchmarked step saves: the size of a real 'choose' step.
OUTPUT = Choice(lines=[OrderLine(item=i, quantity=2) for i in ("eggs", "rice", "oats", "coffee")])

_FLOOR_TABLE = """
create table if not exists bench_floor (id bigserial primary key, payload text not null)
"""


async def _output(_: object) -> Choice:
    return OUTPUT


async def measure_postgres(conn: psycopg.AsyncConnection, n: int) -> dict[str, Figure]:
    await conn.execute(_FLOOR_TABLE)
    sync_commit = await (await conn.execute("show synchronous_commit")).fetchone()
    assert sync_commit == ("on",), f"synchronous_commit is {sync_commit}; the floor needs 'on'"

    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    seed_run = f"{run_id}-seed"
    journal = await Journal.open(conn, run_id, Design.DURABLE, "bench")
    payload = OUTPUT.model_dump_json()
    floor: list[int] = []
    save: list[int] = []
    seed: list[int] = []
    warmup = 50
    # One "choose" step per position, made before the clock starts.
    specs = {i: replace(CHOOSE, number=i) for i in range(1, n + warmup + 1)}
    for i in range(1, n + warmup + 1):
        t0 = time.perf_counter_ns()
        await conn.execute("insert into bench_floor (payload) values (%s)", (payload,))
        t1 = time.perf_counter_ns()
        await journal.step(specs[i], _output)
        t2 = time.perf_counter_ns()
        await _seed_step(conn, seed_run, i)
        t3 = time.perf_counter_ns()
        if i > warmup:
            floor.append(t1 - t0)
            save.append(t2 - t1)
            seed.append(t3 - t2)

    # Replay: a fresh process would open the run (one query) and replay every step from memory.
    t0 = time.perf_counter_ns()
    replaying = await Journal.open(conn, run_id, Design.DURABLE, "bench")
    t1 = time.perf_counter_ns()
    replay: list[int] = []
    for i in range(warmup + 1, n + warmup + 1):
        s0 = time.perf_counter_ns()
        await replaying.step(specs[i], _output)
        replay.append(time.perf_counter_ns() - s0)

    await conn.execute("delete from agent_steps where run_id in (%s, %s)", (run_id, seed_run))
    await conn.execute("delete from agent_runs where run_id = %s", (run_id,))
    await conn.execute("truncate bench_floor")
    return {
        "bare INSERT commit (floor)": Figure.of_ns(floor),
        "journal checkpoint save": Figure.of_ns(save),
        "seed method save (SELECT + INSERT)": Figure.of_ns(seed),
        "journal replayed step": Figure.of_ns(replay),
        f"journal load ({n + warmup} steps, one query)": Figure.of_ns([t1 - t0]),
    }


async def _seed_step(conn: psycopg.AsyncConnection, run_id: str, n: int) -> None:
    """The seed's published method: look the step up, then insert it."""
    cur = await conn.execute(
        "select output from agent_steps where run_id = %s and step = %s", (run_id, n)
    )
    if await cur.fetchone() is None:
        await conn.execute(
            "insert into agent_steps (run_id, step, name, output) values (%s, %s, %s, %s::jsonb)",
            (run_id, n, CHOOSE.name, OUTPUT.model_dump_json()),
        )
