"""crashtest on real workflows: the grocery agent, a payments loop, and (through its pytest plugin)
a workflow written in the test itself. Workers are SIGKILLed for real by the interceptor."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashlab.lab import grocery_crashtest_args
from tests.helpers import (
    assert_ends_in_error,
    assert_one_line_error,
    child_env,
    crashtest_both_ways,
    crashtest_runs,
    failing,
    payments,
    run_python,
    untested_but_the_end,
)
from workflows.grocery import ACTIVITY_NAMES

# Three crash tests at once, beside the rest of the suite.
GROCERY = [*grocery_crashtest_args("household-1"), "--jobs", "6"]
WRITERS = (1, 3, 5, 6, 7)  # the steps that write: plan, choose (model calls), order, email, summary


def test_grocery_agent_with_and_without_keys(
    db_url: str, temporal_address: str, tmp_path: Path
) -> None:
    env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address)
    unkeyed = {"KEY_STRATEGY": "none"}
    # --exact: each point's own recovery. That grouped runs (the default) give the same
    # verdicts, keyed and not, is the loaded tier's to show (tests/test_loaded_machine.py runs
    # both grouped beside busy processes, and asserts the failing points asserted here).
    exact = [*GROCERY, "--exact"]
    results = crashtest_runs(
        {
            "keys": (exact, {}),
            "none": (exact, unkeyed),
            "none-real": ([*exact, "--real-timeouts"], unkeyed),
        },
        env,
        tmp_path,
    )
    done, report = results["keys"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["workflow"] == "GroceryAgentWorkflow"
    assert report["activities"] == list(ACTIVITY_NAMES)
    cells = report["cells"]
    # After the last checkpoint the run without a crash only ends (not a point), unless a loaded
    # machine retried the task that took its result: then that point is made too.
    last = f"after-checkpoint:{len(ACTIVITY_NAMES)}"
    only_ends = any(u["boundary"].startswith(last) for u in report["untested"])
    assert [c["crash_at"] for c in cells] == [
        *(f"effect:{n}.1" for n in WRITERS),  # each write's commit, inside its activity
        *(f"after-effect:{n}" for n in range(1, len(ACTIVITY_NAMES) + 1)),
        *(f"after-checkpoint:{n}" for n in range(1, len(ACTIVITY_NAMES) + (not only_ends))),
    ]
    assert all(c["observed"] == report["reference"] for c in cells)
    # In production, after an effect a SIGKILLed worker is noticed through its activity's
    # heartbeat timeout, then the run's workflow task leaves the dead worker's sticky queue; after
    # a checkpoint the worker died holding the workflow task, which times out. The crash test
    # fast-forwards both: it failed the attempt the dead worker held, and took the run off its
    # sticky queue. (On a loaded machine a live worker's workflow task may time out too: the
    # waits named are among those reported; and the heartbeat timeout may end an attempt before
    # the runner has seen the kill, which it then says.)
    failed_at_once = "1 attempt(s) it held failed at once, to be retried"
    for c in cells:
        step = c["activity"].partition(",")[0]  # (at an effect: "place_order, effect 1 (...)")
        if c["crash_at"].startswith(("after-effect", "effect")):
            production = [f"{step} heartbeat timeout 2.0 s", "sticky queue timeout 1.0 s"]
            assert set(production) <= set(c["waited_on"]), c
            assert failed_at_once in c["fast_forward"] or any(
                "an attempt had ended already" in f for f in c["fast_forward"]
            ), c
        else:
            assert "workflow task start-to-close timeout 10.0 s" in c["waited_on"], c
            assert c["fast_forward"], c
    assert any(failed_at_once in c["fast_forward"] for c in cells)  # the fast-forward acted
    assert f"all {len(cells)} crash points end in the no-crash state" in done.stdout

    done, report = results["none"]
    assert done.returncode == 1, done.stdout + done.stderr
    # Without keys: a second model call at 1, 3, 7, a second order at 5, a second email at 6
    # (4, the price check, only reads), killed after the activity's write or after it returned.
    assert failing(report) == {p for n in WRITERS for p in (f"after-effect:{n}", f"effect:{n}.1")}
    by_point = {c["crash_at"]: c for c in report["cells"]}
    for point in ("effect:5.1", "after-effect:5"):
        assert by_point[point]["diff"] == "orders: 1 → 2 entries"
    assert by_point["after-effect:6"]["diff"] == "emails: 1 → 2 entries"
    said = "killed after place_order's effect 1 (COMMIT orders), before the activity's next line"
    assert f"note: effect:5.1: {said} ran: the retried attempt made it again (orders: 1 → 2" in (
        done.stdout
    )
    assert "after-effect:5 (place_order), after-effect:6 (send_confirmation)" in done.stdout

    # Waiting out the server's real timeouts gives the same verdicts, and waits on the timeout
    # that the fast-forwarded report names first (the kill's own: the activity's, or the held
    # workflow task's); the rest may differ on a loaded machine, where a live worker's task can
    # time out too.
    real_done, real = results["none-real"]
    assert real_done.returncode == 1, real_done.stdout + real_done.stderr
    fast = {c["crash_at"]: (c["matches"], c["diff"]) for c in report["cells"]}
    slow = {c["crash_at"]: (c["matches"], c["diff"]) for c in real["cells"]}
    assert slow == fast

    for f, s in zip(report["cells"], real["cells"], strict=True):
        step = f["activity"].partition(",")[0]
        held = "workflow task start-to-close timeout 10.0 s"
        inside = f["crash_at"].startswith(("after-effect", "effect"))
        own = f"{step} heartbeat timeout 2.0 s" if inside else held
        assert own in f["waited_on"] and own in s["waited_on"], (f, s)
        # Nothing fast-forwarded; a cell run again on a loaded machine says so, and only that.
        assert all(note.startswith("ran again") for note in s["fast_forward"]), s


def test_payments_unkeyed_charges_are_caught_at_exactly_the_charges(
    db_url: str, temporal_address: str, tmp_path: Path
) -> None:
    """...and a second crash during recovery (`*2`) at a charge: the keyed charge still happens
    once; the unkeyed one three times."""
    env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address)
    twice = ["--points", "after-effect:charge#2*2"]
    # One point, `*2`: a group of one is the --exact run; only the others run both ways.
    results = crashtest_both_ways(
        {
            "keyed": (payments("keyed_worker"), {}),
            "unkeyed": (payments("unkeyed_worker"), {}),
            "keyed-twice": ([*payments("keyed_worker"), *twice], {}),
            "unkeyed-twice": ([*payments("unkeyed_worker"), *twice], {}),
        },
        env,
        tmp_path,
        grouped_too={"keyed", "unkeyed"},
    )
    done, report = results["keyed"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["activities"] == ["look_up_invoices", "charge#1 (acme inv-1)",
                                    "charge#2 (acme inv-2)", "charge#3 (acme inv-3)",
                                    "send_receipt"]  # fmt: skip
    assert not failing(report) and untested_but_the_end(report) == []

    done, report = results["unkeyed"]
    assert done.returncode == 1, done.stdout + done.stderr
    charges = {"after-effect:2", "after-effect:3", "after-effect:4"}
    assert failing(report) == charges | {"effect:2.1", "effect:3.1", "effect:4.1"}
    diffs = {c["diff"] for c in report["cells"] if not c["matches"]}
    assert diffs == {"charges: 3 → 4 entries"}

    for name, code, diff in [("keyed-twice", 0, None), ("unkeyed-twice", 1,
                                                         "charges: 3 → 5 entries")]:  # fmt: skip
        done, report = results[name]
        assert done.returncode == code, done.stdout + done.stderr
        [cell] = report["cells"]
        assert (cell["crash_at"], cell["crashes"], cell["diff"]) == ("after-effect:3*2", 2, diff)
        # Only the boundary asked for was crashed: the others are listed as not tested.
        assert [u["boundary"] for u in report["untested"]] == [
            b for b in report["activities"] if b != "charge#2 (acme inv-2)"
        ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--worker": "nosuch.module:build"}, "cannot import 'nosuch.module'"),
        ({"--worker": "worker:no_such_factory"}, "'worker' has no 'no_such_factory'"),
        ({"--input": "{household"}, "--input is not JSON"),
        ({"--workflow": "worker:build_worker"}, "is not a @workflow.defn class"),
        ({"--observe": "agent.outcome"}, "expected MODULE:NAME"),
        ({"--points": "after-lunch:1"}, "unknown crash point 'after-lunch:1'"),
    ],
)
def test_bad_input_is_one_line(
    change: dict[str, str], message: str, db_url: str, temporal_address: str
) -> None:
    args = list(GROCERY)
    for flag, value in change.items():
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    done = run_python(
        ["-m", "temporal_crashtest", "run", *args],
        child_env(db_url, TEMPORAL_ADDRESS=temporal_address),
    )
    assert_one_line_error(done, message, prefix="crashtest: error: ")


def test_a_point_that_names_no_boundary_and_a_broken_factory_are_one_line(
    db_url: str, temporal_address: str
) -> None:
    env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address)
    done = run_python(["-m", "temporal_crashtest", "run", *payments("keyed_worker"),
                       "--points", "after-effect:refund"], env)  # fmt: skip
    assert_ends_in_error(done, "no boundary is named 'refund'; its activities: look_up_invoices, "
                         "charge, send_receipt", "crashtest: error: ")  # fmt: skip

    args = payments("keyed_worker")
    args[1] = "tests.programs.wrong_queue:build"
    done = run_python(["-m", "temporal_crashtest", "run", *args], env, timeout=60)
    assert_ends_in_error(done, "it must use the task_queue it is given", "crashtest: error: ")
