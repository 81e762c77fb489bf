"""What DBOS costs, on the same Postgres as the journal and Temporal figures: a step (DBOS records
its output), the grocery agent's run (stub model), runs at once, and the recovery of a run whose
process was SIGKILLed (a fresh process: start-up, DBOS's launch and recovery, the rest of the
run).

`python -m bench.dbos STEPS RUNS THROUGHPUT_RUNS CONCURRENCY` measures the first three in a
process of its own (DBOS is one per process), on a schema of its own, and prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid

from dbos import DBOS, SetWorkflowID
from temporal_crashtest import Processes

from agent.llm import StubModel
from bench.stats import Figure, Throughput
from dbos_agent.__main__ import dbos_config
from dbos_agent.agent import DBOSRequest, Dependencies, KeyDesign, grocery_agent, use
from infra.config import PROJECT_ROOT
from infra.db import connect_postgres, ensure_database_url, ensure_schema, open_pool

SCHEMA = "dbos_bench"


@DBOS.step(name="bench_noop")
async def noop(i: int) -> int:
    return i


@DBOS.workflow(name="BenchSteps")
async def timed_steps(n: int) -> list[int]:
    """`n` steps that do nothing: each one's time is what DBOS adds (record its output)."""
    samples = []
    for i in range(n):
        started = time.perf_counter_ns()
        await noop(i)
        samples.append(time.perf_counter_ns() - started)
    return samples


async def measure(steps: int, runs: int, many: int, concurrency: int) -> dict[str, object]:
    url = ensure_database_url()
    async with await connect_postgres(url) as conn:
        await ensure_schema(conn)
    pool = await open_pool(url, max_size=concurrency + 1)
    use(Dependencies(pool=pool, model=StubModel(), grocer=None))
    DBOS(config=dbos_config(url, f"bench-{uuid.uuid4().hex[:8]}", SCHEMA))
    DBOS.launch()
    tag = uuid.uuid4().hex[:8]
    request = DBOSRequest(household="bench", design=KeyDesign.KEYED)

    async def run(i: int) -> int:
        started = time.perf_counter_ns()
        with SetWorkflowID(f"bench-dbos-{tag}-{i}"):
            handle = await DBOS.start_workflow_async(grocery_agent, request)
        await handle.get_result()
        return time.perf_counter_ns() - started

    try:
        step = await timed_steps(steps)
        per_run = [await run(i) for i in range(runs)]
        limit = asyncio.Semaphore(concurrency)

        async def bounded(i: int) -> int:
            async with limit:
                return await run(i)

        started = time.perf_counter()
        await asyncio.gather(*(bounded(runs + i) for i in range(many)))
        seconds = time.perf_counter() - started
    finally:
        DBOS.destroy()
        await pool.close()
    return {
        "dbos step (output recorded)": Figure.of_ns(step).model_dump(),
        "dbos grocery run (stub model)": Figure.of_ns(per_run).model_dump(),
        "throughput: dbos": Throughput(
            per_s=round(many / seconds, 1), runs=many, seconds=round(seconds, 2)
        ).model_dump(),
    }


async def dbos_figures_in_child(
    steps: int, runs: int, many: int, concurrency: int
) -> dict[str, Figure | Throughput]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.dbos",
        str(steps),
        str(runs),
        str(many),
        str(concurrency),
        cwd=PROJECT_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        last = err.decode(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"python -m bench.dbos exited {proc.returncode}: {last[0]}")
    figures: dict[str, Figure | Throughput] = {}
    for name, value in json.loads(out.decode().strip().splitlines()[-1]).items():
        figures[name] = Throughput(**value) if "per_s" in value else Figure(**value)
    return figures


async def measure_dbos_recovery(procs: Processes, runs: int) -> Figure:
    """A run's process SIGKILLed in the order step (after the order, before DBOS recorded it);
    the time from a fresh process's start until it has recovered and finished the run."""
    samples = []
    for _ in range(runs):
        run_id = f"bench-dbos-recovery-{uuid.uuid4().hex[:8]}"
        args = ["run", "--run-id", run_id, "--executor-id", run_id, "--schema", SCHEMA]
        doomed = await procs.start(
            f"{run_id}-a", ["-m", "crashlab.dbos_crash", *args], CRASH_AT="after-effect:4"
        )
        await procs.wait(doomed, 60)
        started = time.perf_counter_ns()
        code = await procs.run(f"{run_id}-b", ["-m", "dbos_agent", *args], 60)
        if code != 0:
            last = procs.last_line(f"{run_id}-b")
            raise RuntimeError(f"the recovering process exited {code}: {last}")
        samples.append(time.perf_counter_ns() - started)
    return Figure.of_ns(samples)


if __name__ == "__main__":
    steps_, runs_, many_, concurrency_ = (int(a) for a in sys.argv[1:5])
    print(json.dumps(asyncio.run(measure(steps_, runs_, many_, concurrency_))))
