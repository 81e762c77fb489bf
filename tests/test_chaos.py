"""Chaos under load, short: real processes SIGKILLed at random, Postgres and Temporal SIGKILLed and
restarted, on the lab's own servers; then the invariants, checked straight from Postgres."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from crashlab.faults import next_gap
from crashlab.invariants import NO_RUN, check_runs
from crashlab.servers import LabPostgres, LabTemporal
from infra.db import connect_postgres
from starter import this_week
from tests.helpers import (
    RESULT_TIMEOUT_S,
    ROOT,
    WorkerProcess,
    assert_one_line_error,
    child_env,
    new_run_id,
    prepare_database,
    run_journal,
    run_python,
)

pytestmark = pytest.mark.servers  # the lab's own Postgres and Temporal, and its processes


def lab_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The lab starts servers of its own (under DATA_DIR) when none is named."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "TEMPORAL_ADDRESS")}
    return {**env, "DATA_DIR": str(tmp_path), **extra}


def chaos(tmp_path: Path, *args: str, **env: str) -> dict[str, Any]:
    out = tmp_path / "chaos.json"
    done = run_python(
        [
            "-m",
            "crashlab",
            "chaos",
            *args,
            "--seed",
            "7",
            "--deadline-s",
            "200",
            "--json",
            str(out),
        ],
        lab_env(tmp_path, **env),
        timeout=270,  # past the deadline, a report that says which runs did not end
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "completed; worker kills" in done.stderr  # progress while it runs
    report: dict[str, Any] = json.loads(out.read_text())
    assert report["violations"] == []
    assert report["completed"] == report["runs"]
    return report


def test_temporal_keeps_every_invariant_through_kills_and_restarts(tmp_path: Path) -> None:
    args = ["--runs", "30", "--workers", "2", "--kills", "3"]
    report = chaos(tmp_path, *args, "--postgres-restarts", "1", "--temporal-restarts", "1")
    assert report["faults"] == {"worker_kills": 3, "postgres_restarts": 1, "temporal_restarts": 1}
    assert set(report) >= {"engine", "design", "runs", "completed", "violations", "faults",
                           "recovery_ms", "seconds"}  # fmt: skip
    # The workers said when they lost a server and when they had it back (one that was killed
    # soon after may not have seen it come back; another did).
    logs = "".join(p.read_text() for p in (tmp_path / "chaos" / "logs").glob("worker-*.log"))
    assert "lost Temporal" in logs and "Temporal is back after" in logs


def test_journal_keeps_every_invariant_through_kills_and_a_restart(
    tmp_path: Path, db: psycopg.Connection
) -> None:
    backend = db.execute("select pg_backend_pid()").fetchone()
    args = ["--engine", "journal", "--runs", "60", "--workers", "2", "--kills", "3"]
    # The journal is quick: longer pauses keep its runs in flight until every fault has landed.
    report = chaos(tmp_path, *args, "--postgres-restarts", "1", STEP_PAUSE_MS="100-300")
    assert report["faults"]["worker_kills"] == 3
    assert report["faults"]["postgres_restarts"] == 1
    # The lab restarted its own Postgres, not the project's: this connection lived through it.
    assert db.execute("select pg_backend_pid()").fetchone() == backend


async def test_the_checker_sees_a_duplicate_and_a_row_of_no_run(fresh_db_url: str) -> None:
    """The invariants must be able to fail: a weak design's duplicate order is reported."""
    weak, strong = new_run_id("chk-checkpoint"), new_run_id("chk-durable")
    run_journal(fresh_db_url, weak, "checkpoint", "after-effect:4")
    assert run_journal(fresh_db_url, weak, "checkpoint").returncode == 0
    assert run_journal(fresh_db_url, strong, "durable").returncode == 0
    async with await connect_postgres(fresh_db_url) as conn:
        await conn.execute(
            "insert into orders (run_id, items) values (%s, '[]')", (new_run_id("chk-stray"),)
        )
        found = await check_runs(conn, [weak, strong], {weak, strong}, "chk-")
        missing = await check_runs(conn, [strong], set(), strong)
    assert [(v.run_id, v.what) for v in found] == [
        (weak, "3 model calls, 2 orders, 1 email"),
        (NO_RUN, "1 order of no run"),
    ]
    assert [v.what for v in missing] == ["not completed"]


@pytest.mark.parametrize(
    ("env", "args", "message"),
    [
        ({"DATABASE_URL": "postgresql://x@127.0.0.1:1/x"}, ["--postgres-restarts", "1"],
         "DATABASE_URL is set: the lab restarts only a Postgres it started"),
        ({"TEMPORAL_ADDRESS": "127.0.0.1:1"}, ["--postgres-restarts", "0"],
         "TEMPORAL_ADDRESS is set: the lab restarts only a server it started"),
        ({}, ["--design", "sometimes"], "unknown key strategy 'sometimes'"),
    ],
)  # fmt: skip
def test_chaos_refuses_what_it_may_not_do(
    env: dict[str, str], args: list[str], message: str, tmp_path: Path
) -> None:
    done = run_python(["-m", "crashlab", "chaos", *args], lab_env(tmp_path, **env))
    assert_one_line_error(done, message)


async def until_started(
    handle: WorkflowHandle[Any, Any], starter: asyncio.subprocess.Process
) -> None:
    """Until the starter's run is on the server: the starter now only waits."""
    while True:
        with contextlib.suppress(RPCError):
            await handle.describe()
            return
        assert starter.returncode is None, await starter.communicate()
        await asyncio.sleep(0.1)


async def test_the_starter_lives_through_a_postgres_restart(
    tmp_path: Path, temporal_address: str, workers: Callable[..., WorkerProcess], client: Client
) -> None:
    """A Postgres of the test's own is SIGKILLed and started again while `starter.py` waits on
    its run: the run completes, and the starter reports it (it holds no connection meanwhile)."""
    postgres = LabPostgres(tmp_path)
    url = await postgres.start()
    try:
        prepare_database(url)
        queue, household = new_run_id("q"), new_run_id("h")
        workers(queue, DATABASE_URL=url, STEP_PAUSE_MS="300")
        waiting = await asyncio.create_subprocess_exec(
            sys.executable, "starter.py", "--task-queue", queue, "--household", household, "--json",
            cwd=ROOT, env=child_env(url, TEMPORAL_ADDRESS=temporal_address),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        handle = client.get_workflow_handle(f"grocery-{household}-{this_week()}")
        await until_started(handle, waiting)
        await postgres.kill()
        await postgres.start()
        stdout, stderr = await asyncio.wait_for(waiting.communicate(), RESULT_TIMEOUT_S)
        assert waiting.returncode == 0, stderr.decode()
        out = json.loads(stdout)
        assert (out["model_calls"], out["orders"], out["emails"]) == (3, 1, 1)
    finally:
        await postgres.stop()


async def test_the_starter_says_plainly_when_temporal_is_away(
    tmp_path: Path, db_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    """A Temporal dev server of the test's own is SIGKILLed while `starter.py` waits on its run,
    and started again 8 s later: the starter says Temporal does not answer (not "is a worker
    running?"), prints no escape codes (the SDK's own coloured console lines), and reports the
    run once it completes."""
    temporal = LabTemporal(tmp_path)
    address = await temporal.start()
    try:
        queue, household = new_run_id("q"), new_run_id("h")
        workers(queue, TEMPORAL_ADDRESS=address, STEP_PAUSE_MS="300")
        waiting = await asyncio.create_subprocess_exec(
            sys.executable, "starter.py", "--task-queue", queue, "--household", household, "--json",
            cwd=ROOT, env=child_env(db_url, TEMPORAL_ADDRESS=address),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        client = await Client.connect(address)
        handle = client.get_workflow_handle(f"grocery-{household}-{this_week()}")
        await until_started(handle, waiting)
        await temporal.kill()
        await asyncio.sleep(8)  # past the starter's 5 s "still waiting"
        await temporal.start()
        stdout, stderr = await asyncio.wait_for(waiting.communicate(), RESULT_TIMEOUT_S)
        said = stderr.decode()
        assert waiting.returncode == 0, said
        assert (json.loads(stdout)["orders"], "\x1b" in said) == (1, False), said
        assert "Temporal does not answer" in said and "is a worker running" not in said, said
    finally:
        await temporal.stop()


def test_faults_are_spread_over_the_runs_whole_lifetime() -> None:
    """With 1,000 runs nothing finishes for minutes: the pace comes from the work done, and the
    gaps are not capped, so 20 faults over an estimated 300 s are spread over minutes, not 30 s
    (and end before the runs do: an estimate may run long)."""
    rng = random.Random(1)
    gaps = []
    left = 300.0
    for faults_left in range(19, -1, -1):
        gap = next_gap(left, faults_left, rng)
        gaps.append(gap)
        left -= gap
    assert 100 < sum(gaps) < 300, gaps  # spread over minutes, ending before the runs do
    assert next_gap(None, 19, rng) < 1  # until the first step is done: short gaps


def test_dbos_keeps_every_invariant_through_kills_restarts_and_model_faults(
    tmp_path: Path,
) -> None:
    """Kills, two Postgres restarts and a model that answers three calls in four: every run
    completes with one paid call per step (the invariants), and no process had to be restarted
    for a stuck run (its steps retried through the outages): only the killed ones were. (One
    still launching when Postgres restarted, on a loaded machine, dies before it is at work: a
    failed start, counted apart.)"""
    args = ["--engine", "dbos", "--runs", "40", "--workers", "2", "--kills", "3"]
    report = chaos(tmp_path, *args, "--postgres-restarts", "2", STUB_MODEL_FAULT="unavailable")
    assert report["faults"]["postgres_restarts"] == 2
    assert 1 <= report["faults"]["worker_kills"] <= 3
    assert report["process_restarts"] == report["faults"]["worker_kills"]
    assert report["fault_times_s"] and len(report["completion_times_s"]) == 40
