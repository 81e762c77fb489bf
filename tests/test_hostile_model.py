"""A hostile model, through a real OpenAI-compatible exchange, inside real Temporal runs: answers
that Postgres's `jsonb` or Temporal's payload limit refuse, an item no price list holds, escape
codes for the terminal, the configured key echoed back. Each refused answer costs one paid call
and one attempt, and ends the run with one line naming the step and why."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable

import psycopg
import pytest
from temporalio.client import Client

from starter import this_week
from tests.fake_openai import FakeOpenAI
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
from tests.test_dbos import setup_dbos
from workflows.grocery import ACTIVITY_NAMES

# the step's activity, in the history
STEP_POSITION = {step: ACTIVITY_NAMES.index(step) for step in ("plan", "choose", "summarise")}
EFFECTS_BEFORE = {"plan": (0, 0), "choose": (0, 0), "summarise": (1, 1)}  # orders, emails

REFUSED = [
    ("NaN", "plan", '{"staples": ["milk"], "note": NaN}', "the non-finite number NaN"),
    ("Infinity", "choose", '{"lines": [{"item": "milk", "quantity": Infinity}]}',
     "the non-finite number Infinity"),
    ("1e999", "choose", '{"lines": [{"item": "milk", "quantity": 1e999}]}',
     "the number 1e999 (not finite)"),
    ("NUL", "summarise", "Done.\x00", "a NUL character"),
    ("escaped NUL", "summarise", '{"text": "Done.\\u0000"}', "a NUL character (escaped)"),
    ("lone surrogate", "summarise", '{"text": "Done \\ud800"}', "a lone surrogate (escaped)"),
    ("100 kB", "summarise", json.dumps({"text": "x" * 100_000}),
     "it is 100012 bytes, over MODEL_MAX_ANSWER_BYTES=65536"),
    ("30 MB, cut off as it streams", "summarise", json.dumps({"text": "x" * 30_000_000}),
     "its response passed 458752 bytes, more than an answer of MODEL_MAX_ANSWER_BYTES=65536 "
     "takes, and was cut off there"),
    ("nested 3000 deep", "plan", "[" * 3000 + "]" * 3000, "it nests 3000 deep, over 32"),
    ("nested, unclosed", "choose", '{"lines": ' + "[{" * 2000, "it nests 4001 deep, over 32"),
    ("caviar", "plan", '{"staples": ["caviar"], "note": "treat yourself"}',
     "the model chose 'caviar', which is not on the price list"),
]  # fmt: skip


async def run_once(
    provider: FakeOpenAI, db_url: str, address: str, workers: Callable[..., WorkerProcess],
    *args: str, **env: str,
) -> tuple[str, subprocess.CompletedProcess[str]]:  # fmt: skip
    """One run through the fake model: its workflow id, and the starter's exit and output."""
    queue, household = new_run_id("q"), new_run_id("h")
    workers(queue, **provider.env(), **env)
    done = await asyncio.to_thread(
        run_python,
        ["starter.py", "--task-queue", queue, "--household", household, *args],
        child_env(db_url, TEMPORAL_ADDRESS=address),
        RESULT_TIMEOUT_S,
    )
    return f"grocery-{household}-{this_week()}", done


@pytest.mark.parametrize(("case", "step", "answer", "why"), REFUSED, ids=[c[0] for c in REFUSED])
async def test_a_refused_answer_is_paid_for_once(
    case: str, step: str, answer: str, why: str, provider: FakeOpenAI, db_url: str,
    temporal_address: str, workers: Callable[..., WorkerProcess], client: Client,
    db: psycopg.Connection,
) -> None:  # fmt: skip
    provider.hostile[step] = answer
    workflow_id, done = await run_once(provider, db_url, temporal_address, workers)
    done_step = "choose" if case == "caviar" else step  # the plan was fine; its choice is not
    assert_one_line_error(done, why)
    if case != "caviar":
        assert f"({step}): the model's answer is refused" in done.stderr
    history = await attempts(client, workflow_id)
    assert history[STEP_POSITION[done_step]] == 1 and len(history) == STEP_POSITION[done_step] + 1
    assert provider.asked[done_step] == 1  # one paid call, not twenty
    final = state(db, workflow_id)
    assert (len(final.orders), len(final.emails)) == EFFECTS_BEFORE[done_step]


async def test_escape_codes_and_an_echoed_key_are_shown_harmless(
    provider: FakeOpenAI, db_url: str, temporal_address: str,
    workers: Callable[..., WorkerProcess], client: Client, db: psycopg.Connection,
) -> None:  # fmt: skip
    """A summary that clears the screen, writes the clipboard (OSC 52) and echoes the model's
    key: the run completes, the starter prints the escapes as text, and the key is kept nowhere
    (model_calls, the history, the output)."""
    key = provider.env()["MODEL_API_KEY"]
    text = f"Done. \x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07 Your key is {key}."
    provider.hostile["summarise"] = json.dumps({"text": text})
    workflow_id, done = await run_once(provider, db_url, temporal_address, workers)
    stdout, stderr = done.stdout, done.stderr
    assert done.returncode == 0, stderr
    assert "\x1b" not in stdout and "\x07" not in stdout
    assert "summary:  Done. \\x1b[2J\\x1b]52;c;cm0gLXJmIH4=\\x07 Your key is ***." in stdout
    history = (await client.get_workflow_handle(workflow_id).fetch_history()).to_json()
    kept = db.execute("select response::text from model_calls where run_id = %s", (workflow_id,))
    for where in (stdout, stderr, history, *(row[0] for row in kept)):
        assert key not in where


def unanswered(db: psycopg.Connection, run_id: str) -> int:
    rows = db.execute(
        "select count(*) from model_calls where run_id = %s and response ? 'unanswered'",
        (run_id,),
    ).fetchone()
    return rows[0] if rows else 0


async def test_a_model_too_slow_for_its_timeout_is_paid_a_few_times_on_each_engine(
    provider: FakeOpenAI, db_url: str, temporal_address: str,
    workers: Callable[..., WorkerProcess], db: psycopg.Connection,
) -> None:  # fmt: skip
    """A model that answers in 2 s behind MODEL_TIMEOUT_S=1: each request reached it (and may
    be charged). It was asked 20 times for one step, the run failing after 104 s; now the step
    fails after MODEL_PAID_ATTEMPTS (3) with one line naming both settings, on Temporal and on
    DBOS alike, each unanswered call recorded."""
    provider.slow["plan"] = 2.0
    why = "the model did not answer on 3 paid attempts (MODEL_PAID_ATTEMPTS=3)"
    workflow_id, done = await run_once(provider, db_url, temporal_address, workers,
                                       MODEL_TIMEOUT_S="1")  # fmt: skip
    assert_one_line_error(done, why)
    assert "MODEL_TIMEOUT_S" in done.stderr
    assert provider.received["plan"] == 3 and unanswered(db, workflow_id) == 3

    setup_dbos(db_url)
    run_id = new_run_id("slow-model")
    done = await asyncio.to_thread(
        run_python,
        ["-m", "dbos_agent", "run", "--run-id", run_id],
        child_env(db_url, **provider.env(), MODEL_TIMEOUT_S="1"),
        RESULT_TIMEOUT_S,
    )
    assert_one_line_error(done, why)
    assert provider.received["plan"] == 6 and unanswered(db, run_id) == 3
