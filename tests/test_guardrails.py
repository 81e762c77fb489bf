"""Guardrails before spending, a model that misbehaves, and running a failed week again: on a
real Temporal server, with real worker processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable

import psycopg
import pytest
from temporalio.client import Client

from starter import this_week
from tests.helpers import (
    RESULT_TIMEOUT_S,
    WorkerProcess,
    assert_one_line_error,
    attempts,
    child_env,
    new_run_id,
    run_python,
    state,
)


async def start(
    db_url: str, address: str, queue: str, household: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        run_python,
        ["starter.py", "--task-queue", queue, "--household", household, *args],
        child_env(db_url, TEMPORAL_ADDRESS=address),
        RESULT_TIMEOUT_S,
    )


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("unknown-item", "the model chose 'caviar', which the pantry did not report missing"),
        ("over-budget", "over the household's budget of 45.00"),
        ("too-many", "; at most 6 of an item"),
    ],
)
async def test_a_guardrail_ends_the_run_before_any_order(
    fault: str, message: str, db_url: str, temporal_address: str,
    workers: Callable[..., WorkerProcess], client: Client, db: psycopg.Connection,
) -> None:  # fmt: skip
    queue, household = new_run_id("q"), new_run_id("h")
    workers(queue, STUB_MODEL_FAULT=fault)
    done = await start(db_url, temporal_address, queue, household)
    assert_one_line_error(done, message)
    workflow_id = f"grocery-{household}-{this_week()}"
    final = state(db, workflow_id)
    assert (len(final.orders), len(final.emails)) == (0, 0)
    assert await attempts(client, workflow_id) == [1, 1, 1]  # choose failed once, for good


async def test_a_malformed_answer_is_asked_again_then_accepted(
    db_url: str, temporal_address: str, workers: Callable[..., WorkerProcess]
) -> None:
    """Each step's first answer is not JSON: each is asked again, every call recorded."""
    queue, household = new_run_id("q"), new_run_id("h")
    workers(queue, STUB_MODEL_FAULT="malformed")
    done = await start(db_url, temporal_address, queue, household, "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["model_calls"], out["orders"], out["emails"]) == (6, 1, 1)


async def test_a_failed_week_runs_again(
    db_url: str, temporal_address: str, workers: Callable[..., WorkerProcess],
    db: psycopg.Connection,
) -> None:  # fmt: skip
    queue, household = new_run_id("q"), new_run_id("h")
    misbehaving = workers(queue, STUB_MODEL_FAULT="unknown-item")
    failed = await start(db_url, temporal_address, queue, household)
    assert_one_line_error(failed, "run it again with --again")
    misbehaving.stop()  # the model is fixed (here: a worker without the fault)
    workers(queue)
    again = await start(db_url, temporal_address, queue, household, "--again", "--json")
    assert again.returncode == 0, again.stderr
    out = json.loads(again.stdout)
    assert (out["orders"], out["emails"]) == (1, 1)
    # The failed run's two paid calls stay on record, set aside; the new run made its three.
    assert out["model_calls"] == 5
    keys = db.execute(
        "select count(*) from model_calls where run_id = %s and idempotency_key like %s",
        (out["workflow_id"], "%~superseded-%"),
    ).fetchone()
    assert keys == (2,)
    once_more = await start(db_url, temporal_address, queue, household, "--again")
    assert_one_line_error(once_more, "is completed: --again runs only a failed week again")


def test_a_bad_stub_fault_is_one_line(db_url: str, temporal_address: str) -> None:
    done = run_python(
        ["worker.py"],
        child_env(db_url, TEMPORAL_ADDRESS=temporal_address, STUB_MODEL_FAULT="sleepy"),
    )
    assert_one_line_error(done, "unknown STUB_MODEL_FAULT 'sleepy'; valid: malformed")
