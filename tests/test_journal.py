"""The hand-rolled journal baseline on real Postgres, crashed by real SIGKILLs."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psycopg
import pytest

from agent.data import Plan
from agent.llm import StubModel
from agent.model_errors import ModelOutputError
from agent.steps import CHOOSE, PLAN, Step
from infra.db import connect_postgres
from infra.errors import ConfigError
from journal.agent import run_to_completion
from journal.crash_points import StepCrashPoint
from journal.engine import Design, DeterminismError, Journal
from tests.helpers import (
    ROOT,
    assert_one_line_error,
    child_env,
    new_run_id,
    run_journal,
    run_python,
    state,
)

DESIGNS = [d.value for d in Design]
NO_CRASH = (3, 1, 1)  # model calls, orders, emails


@pytest.fixture(scope="module")
def reference(db_url: str, db: psycopg.Connection) -> dict[str, object]:
    """The final state of a durable run that never crashed."""
    run_id = new_run_id("reference")
    done = run_journal(db_url, run_id, "durable")
    assert done.returncode == 0, done.stderr
    return state(db, run_id).comparable()


@pytest.mark.parametrize("design", DESIGNS)
def test_every_design_without_a_crash(
    design: str, db_url: str, db: psycopg.Connection, reference: dict[str, object]
) -> None:
    run_id = new_run_id(f"nocrash-{design}")
    done = run_journal(db_url, run_id, design)
    assert done.returncode == 0, done.stderr
    assert "completed" in done.stdout
    final = state(db, run_id)
    assert final.counts == NO_CRASH
    assert final.comparable() == reference


# (design, crash point) -> final (model calls, orders, emails) after the resumed run.
EXPECTED = {
    ("naive", "after-effect:4"): (5, 2, 1),  # starts over: plan and choose again, a second order
    ("naive", "after-checkpoint:4"): (5, 2, 1),  # nothing was saved, so the same
    ("checkpoint", "after-effect:4"): (3, 2, 1),  # the order ran, its checkpoint did not: again
    ("checkpoint", "after-checkpoint:4"): NO_CRASH,
    ("durable", "after-effect:4"): NO_CRASH,  # the repeat finds the order by its key
    ("durable", "after-checkpoint:4"): NO_CRASH,
    ("transactional", "after-effect:4"): NO_CRASH,  # the order rolled back with its checkpoint
    ("transactional", "after-checkpoint:4"): NO_CRASH,
}


@pytest.mark.parametrize(("design", "crash_at"), list(EXPECTED))
def test_sigkill_then_resume(
    design: str, crash_at: str, db_url: str, db: psycopg.Connection, reference: dict[str, object]
) -> None:
    run_id = new_run_id(f"crash-{design}")
    crashed = run_journal(db_url, run_id, design, crash_at)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert f"CRASH {crash_at}" in crashed.stderr

    resumed = run_journal(db_url, run_id, design)
    assert resumed.returncode == 0, resumed.stderr

    final = state(db, run_id)
    assert final.counts == EXPECTED[design, crash_at]
    if EXPECTED[design, crash_at] == NO_CRASH:
        # Not just the counts: the same items, the email naming this run's one order, the summary.
        assert final.comparable() == reference
        assert f"#{final.orders[0].id}" in final.emails[0].body
    else:
        # The weaker designs must visibly fail: this is how we know the test can see a duplicate.
        assert final.comparable() != reference


def test_transactional_crash_leaves_no_order_behind(db_url: str, db: psycopg.Connection) -> None:
    """Killed between the order and its checkpoint, the transaction never committed."""
    run_id = new_run_id("tx-window")
    crashed = run_journal(db_url, run_id, "transactional", "after-effect:4")
    assert crashed.returncode == -signal.SIGKILL
    assert state(db, run_id).counts == (2, 0, 0)


async def test_reordered_steps_fail_with_a_determinism_error(db_url: str) -> None:
    run_id = new_run_id("determinism")
    model = StubModel()
    async with await connect_postgres(db_url) as conn:
        await run_to_completion(conn, model, run_id, Design.DURABLE, "household-1")

        # The same run, replayed by code that asks for "choose" where "check_pantry" was saved.
        journal = await Journal.open(conn, run_id, Design.DURABLE, "household-1")
        await journal.step(PLAN, _never_called)
        choose_second = Step(2, CHOOSE.name, Plan, CHOOSE.effect)
        with pytest.raises(DeterminismError, match="step 2 is 'choose' in the code"):
            await journal.step(choose_second, _never_called)


async def _never_called(_: object) -> Plan:
    raise AssertionError("a saved step must be replayed, not run")


class GarbageModel:
    """A model that answers with text that is not the JSON the step asked for."""

    async def complete(self, prompt: str) -> str:
        return "Sure! Here is your plan: buy milk."


async def test_malformed_model_output_is_a_clear_error(db_url: str, db: psycopg.Connection) -> None:
    run_id = new_run_id("garbage")
    async with await connect_postgres(db_url) as conn:
        with pytest.raises(ModelOutputError, match="model output for step 1 is not a valid Plan"):
            await run_to_completion(conn, GarbageModel(), run_id, Design.DURABLE, "household-1")
    # Asked three times, each call made (and paid for), so recorded; no step saved as done.
    assert state(db, run_id).counts == (3, 0, 0)
    assert db.execute(
        "select count(*) from agent_steps where run_id = %s", (run_id,)
    ).fetchone() == (0,)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--design", "bogus"], {}, "unknown design 'bogus'; valid: naive, checkpoint"),
        ([], {"CRASH_AT": "after-lunch:2"}, "unknown crash point 'after-lunch:2'; expected"),
        ([], {"CRASH_AT": "after-effect:7"}, "unknown crash point 'after-effect:7'"),
        ([], {"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/x"}, "cannot connect to Postgres"),
        ([], {"STUB_MODEL_LATENCY_MS": "soon"}, "STUB_MODEL_LATENCY_MS='soon' is not a number"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    args: list[str], env: dict[str, str], message: str, db_url: str, db: psycopg.Connection
) -> None:
    run_id = new_run_id("bad-input")
    done = run_python(["-m", "journal", "run", "--run-id", run_id, *args], child_env(db_url, **env))
    assert_one_line_error(done, message)
    assert not state(db, run_id).exists()
    assert db.execute(
        "select count(*) from agent_runs where run_id = %s", (run_id,)
    ).fetchone() == (0,)


def test_unknown_run_id_is_one_line(db_url: str) -> None:
    done = run_python(["-m", "journal", "show", "--run-id", "no-such-run"], child_env(db_url))
    assert_one_line_error(done, "no run with id 'no-such-run'")


def test_resuming_with_another_design_is_refused(db_url: str) -> None:
    run_id = new_run_id("design-switch")
    assert run_journal(db_url, run_id, "durable").returncode == 0
    done = run_journal(db_url, run_id, "naive")
    assert_one_line_error(done, "was started with design durable")


def test_resume_finishes_every_unfinished_run(fresh_db_url: str) -> None:
    """What an operator runs after a crash: every unfinished run, each with its own design."""
    crashed = {
        new_run_id("resume-durable"): ("durable", "after-effect:4"),
        new_run_id("resume-checkpoint"): ("checkpoint", "after-checkpoint:3"),
        new_run_id("resume-tx"): ("transactional", "after-effect:5"),
    }
    for run_id, (design, crash_at) in crashed.items():
        assert run_journal(fresh_db_url, run_id, design, crash_at).returncode == -signal.SIGKILL
    done = run_python(["-m", "journal", "resume"], child_env(fresh_db_url))
    assert done.returncode == 0, done.stderr
    assert "resumed 3 runs to completion" in done.stdout
    with psycopg.connect(fresh_db_url, autocommit=True) as conn:
        for run_id in crashed:
            assert state(conn, run_id).counts == NO_CRASH, run_id
        unfinished = conn.execute("select count(*) from agent_runs where status <> 'completed'")
        assert unfinished.fetchone() == (0,)
    again = run_python(["-m", "journal", "resume"], child_env(fresh_db_url))
    assert "resumed 0 runs to completion" in again.stdout


def test_one_process_at_a_time_runs_a_run(db_url: str, db: psycopg.Connection) -> None:
    """Two processes on one run would do its effects twice: the second is refused. The first is
    stopped (SIGSTOP, not killed: its session and lock stay) while the second tries, so that a
    slow start of the second on a loaded machine cannot find the run already finished."""
    run_id = new_run_id("busy")
    slow = child_env(db_url, STUB_MODEL_LATENCY_MS="3000")
    first = subprocess.Popen(
        [sys.executable, "-m", "journal", "run", "--run-id", run_id, "--design", "checkpoint"],
        cwd=ROOT, env=slow, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not db.execute("select 1 from agent_runs where run_id = %s", (run_id,)).fetchone():
            assert time.monotonic() < deadline, "the first process never opened the run"
            time.sleep(0.05)
        first.send_signal(signal.SIGSTOP)
        status = db.execute("select status from agent_runs where run_id = %s", (run_id,))
        assert status.fetchone() == ("running",), "the first process ended before it was stopped"
        second = run_journal(db_url, run_id, "checkpoint")
        first.send_signal(signal.SIGCONT)
        assert_one_line_error(second, f"run {run_id} is being run by another process")
    finally:
        first.send_signal(signal.SIGCONT)
        assert first.wait(60) == 0, first.stderr
    assert state(db, run_id).counts == NO_CRASH  # the second process added nothing


def test_crash_points_are_the_journals_steps() -> None:
    steps = ["plan", "check_pantry", "choose", "place_order", "send_confirmation", "summarise"]
    assert str(StepCrashPoint.parse("after-effect:place_order", steps)) == "after-effect:4"
    assert str(StepCrashPoint.parse("after-checkpoint:6", steps)) == "after-checkpoint:6"
    for text in ("after-lunch:1", "after-effect:0", "after-effect:7", "after-effect:refund",
                 "after-effect:\u0664"):  # fmt: skip
        with pytest.raises(ConfigError, match="expected after-effect:N or after-checkpoint:N"):
            StepCrashPoint.parse(text, steps)
