"""crashtest on every Temporal shape of `examples/shapes`: each keyed variant ends in the no-crash
state at every crash point, and each unkeyed (or naively keyed) variant is caught at exactly its
effect boundaries. Workers are SIGKILLed for real; the effects are rows in Postgres."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from tests.helpers import (
    CrashtestRun,
    child_env,
    crashtest_both_ways,
    crashtest_runs,
    failing,
    untested_but_the_end,
)

OBSERVE = ["--observe", "examples.shapes.ledger:effects_of"]
MONTHS = {"customer": "acme", "months": 2}
BOTH_MONTHS = {"effects": ["charge acme month 1", "charge acme month 2"]}


def shape(
    module: str, factory: str, workflow: str, input: Any, *more: str, observe: list[str] = OBSERVE
) -> list[str]:
    return [
        "--worker",
        f"examples.shapes.{module}:{factory}",
        "--workflow",
        f"examples.shapes.{module}:{workflow}",
        "--input",
        json.dumps(input),
        *observe,
        "--jobs",
        "3",
        *more,
    ]


RUNS: dict[str, list[str]] = {
    "parallel-keyed": shape("parallel", "keyed_worker", "ParallelCharges", ["i-1", "i-2", "i-3"]),
    "parallel-unkeyed": shape(
        "parallel", "unkeyed_worker", "ParallelCharges", ["i-1", "i-2", "i-3"]
    ),
    "local-keyed": shape("local_activity", "keyed_worker", "LocalCharge", "i-1"),
    "local-unkeyed": shape("local_activity", "unkeyed_worker", "LocalCharge", "i-1"),
    "child-keyed": shape("child", "keyed_worker", "ChargeInChild", "i-1"),
    "child-unkeyed": shape("child", "unkeyed_worker", "ChargeInChild", "i-1"),
    "approval-keyed": shape(
        "approval",
        "keyed_worker",
        "ApprovedOrder",
        "milk",
        "--drive",
        "examples.shapes.approval:approve",
    ),
    "approval-unkeyed": shape(
        "approval",
        "unkeyed_worker",
        "ApprovedOrder",
        "milk",
        "--drive",
        "examples.shapes.approval:approve",
    ),
    "approval-undriven": shape("approval", "keyed_worker", "ApprovedOrder", "milk"),
    "chain-keyed": shape(
        "continue_as_new",
        "keyed_worker",
        "MonthlyCharges",
        MONTHS,
        "--expect",
        json.dumps(BOTH_MONTHS),
    ),
    "chain-naive": shape(
        "continue_as_new",
        "naive_worker",
        "MonthlyCharges",
        MONTHS,
        "--expect",
        json.dumps(BOTH_MONTHS),
    ),
    "reset-keyed": shape(
        "reset", "keyed_worker", "ChargeAndReceipt", "i-1", "--points", "reset:1,reset:2"
    ),
    "reset-run-keyed": shape(
        "reset",
        "run_keyed_worker",
        "ChargeAndReceipt",
        "i-1",
        "--points",
        "reset:charge,reset:send_receipt",
    ),
    "retries-keyed": shape("retries", "keyed_worker", "PollThenCharge", "i-1"),
    "retries-unkeyed": shape("retries", "unkeyed_worker", "PollThenCharge", "i-1"),
    "declined-keyed": shape("ends", "keyed_worker", "DeclinedCharge", "i-1"),
    "declined-unkeyed": shape("ends", "unkeyed_worker", "DeclinedCharge", "i-1"),
    "cancelled-keyed": shape(
        "ends",
        "keyed_worker",
        "CancelledOrder",
        "i-1",
        "--drive",
        "examples.shapes.ends:cancel_after_the_charge",
    ),
    "cancelled-unkeyed": shape(
        "ends",
        "unkeyed_worker",
        "CancelledOrder",
        "i-1",
        "--drive",
        "examples.shapes.ends:cancel_after_the_charge",
    ),
    "parallel-slow-keyed": shape(
        "parallel_slow",
        "keyed_worker",
        "ParallelSlowCharges",
        ["i-1", "i-2", "i-3"],
        observe=["--observe", "examples.shapes.parallel_slow:charges_of"],
    ),
    "parallel-slow-unkeyed": shape(
        "parallel_slow",
        "unkeyed_worker",
        "ParallelSlowCharges",
        ["i-1", "i-2", "i-3"],
        observe=["--observe", "examples.shapes.parallel_slow:charges_of"],
    ),
    "two-queues-keyed": shape("two_queues", "keyed_worker", "ChargeThenNotify", "i-1"),
    "two-queues-unkeyed": shape("two_queues", "unkeyed_worker", "ChargeThenNotify", "i-1"),
    "no-retry": shape("no_retry", "keyed_worker", "ChargeOnce", "i-1"),
    "broken": [
        "--worker",
        "examples.shapes.broken:build",
        "--workflow",
        "examples.shapes.broken:UndecodableCharge",
        "--input",
        '"12.50"',
        "--observe",
        "examples.shapes.broken:observe",
    ],
}


def cells(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["crash_at"]: c for c in report["cells"]}


def assert_clean(run: CrashtestRun, activities: list[str]) -> dict[str, Any]:
    done, report = run
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["activities"] == activities
    assert not failing(report) and report["cells"]
    assert untested_but_the_end(report) == [], report["untested"]
    return report


def assert_caught(run: CrashtestRun, points: set[str], diff: str) -> dict[str, Any]:
    done, report = run
    assert done.returncode == 1, done.stdout + done.stderr
    assert failing(report) == points
    assert {c["diff"] for c in report["cells"] if not c["matches"]} == {diff}
    return report


def test_every_shape_keyed_and_unkeyed(db_url: str, temporal_address: str, tmp_path: Path) -> None:
    env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address)
    # Each shape twice (grouped, --exact), as many at once as ran at once before there were two.
    results = crashtest_both_ways(
        {name: (args, {}) for name, args in RUNS.items()}, env, tmp_path, at_once=len(RUNS)
    )

    # Parallel activities: the charges still waiting at a kill die with the worker, unharmed.
    charges = ["charge#1 (i-1)", "charge#2 (i-2)", "charge#3 (i-3)", "send_receipt"]
    report = assert_clean(results["parallel-keyed"], charges)
    assert "charge#2 (i-2)" in cells(report)["after-checkpoint:1"]["in_flight"]
    every_charge = {"after-effect:1", "after-effect:2", "after-effect:3"}
    assert_caught(results["parallel-unkeyed"], every_charge, "effects: 4 → 5 entries")

    # A local activity's effect repeats until its workflow task completes.
    assert_clean(results["local-keyed"], ["charge (local)", "send_receipt"])
    report = assert_caught(results["local-unkeyed"], {"after-effect:1"}, "effects: 2 → 3 entries")
    waits = cells(report)["after-effect:1"]["waited_on"]
    assert "workflow task start-to-close timeout 10.0 s" in waits, waits

    # An effect in a child workflow, named by its place in the tree.
    assert_clean(results["child-keyed"], ["ChargeChild/charge", "send_receipt"])
    assert_caught(results["child-unkeyed"], {"after-effect:1"}, "effects: 2 → 3 entries")

    # An approval sent by --drive as an update, whose handler runs an activity.
    assert_clean(results["approval-keyed"], ["record_approval", "place_order"])
    assert_caught(
        results["approval-unkeyed"], {"after-effect:1", "after-effect:2"}, "effects: 2 → 3 entries"
    )
    done, _ = results["approval-undriven"]
    assert done.returncode == 2, done.stderr
    assert (
        "the run is idle, waiting for something nobody sends (a signal or an update?): pass "
        "--drive" in done.stderr.splitlines()[-1]
    )

    # A continue-as-new chain is one run; the naive key merges month 2 into month 1.
    report = assert_clean(results["chain-keyed"], ["run 1: charge", "run 2: charge"])
    assert "activity ids 1 repeat across the 2 runs" in report["warnings"][0]
    done, report = results["chain-naive"]
    assert done.returncode == 1, done.stderr
    assert report["cells"] == [] and report["expect_diff"] == "effects: 2 → 1 entries"
    assert "the run without a crash already differs from what you expect" in done.stdout

    # An operator's reset repeats what run-id keys guard.
    assert_clean(results["reset-keyed"], ["charge", "send_receipt"])
    done, report = results["reset-run-keyed"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert {c["crash_at"]: c["diff"] for c in report["cells"]} == {
        "reset:1": "effects: 2 → 4 entries",  # charge and receipt again
        "reset:2": "effects: 2 → 3 entries",  # the receipt again
    }

    # Poll by retry and retry until success (3 failed attempts each, by design): judged by the
    # retry policy, not a count of attempts, and no cell is run again as if the machine were
    # loaded (the reference took the same attempts).
    report = assert_clean(results["retries-keyed"], ["wait_until_ready", "charge_when_up"])
    assert not any(c["fast_forward"] and "ran again" in " ".join(c["fast_forward"])
                   for c in report["cells"])  # fmt: skip
    assert_caught(results["retries-unkeyed"], {"after-effect:2"}, "effects: 1 → 2 entries")

    # Parallel activities with 5-minute timeouts and no heartbeat: what the dead worker held
    # besides the crashed attempt is failed at once (found from the server), so no cell waits
    # out a timeout; every point is made (which one finishes last varies from run to run).
    slow = ["charge#1 (i-1)", "charge#2 (i-2)", "charge#3 (i-3)"]
    report = assert_clean(results["parallel-slow-keyed"], slow)
    assert all(c["recovery_s"] < 10 for c in report["cells"] if c["recovery_s"]), report["cells"]
    assert len(report["cells"]) == 6
    done, report = results["parallel-slow-unkeyed"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert failing(report) == {"after-effect:1", "after-effect:2", "after-effect:3"}

    # Two task queues served by one worker process (the factory builds a Worker per queue): the
    # receipt, on a queue of its own, is crashed like the charge.
    report = assert_clean(results["two-queues-keyed"], ["charge", "send_receipt"])
    assert {c["crash_at"] for c in report["cells"]} == {
        "after-effect:1", "after-effect:2", "after-checkpoint:1"
    }  # fmt: skip
    both = {"after-effect:1", "after-effect:2"}
    assert_caught(results["two-queues-unkeyed"], both, "effects: 2 → 3 entries")

    # A killed attempt no retry follows: the cell ends at once with what production sees, not
    # after the 5-minute timeout (keys cannot help; retries can).
    done, report = results["no-retry"]
    assert done.returncode == 1, done.stdout + done.stderr
    [cell] = report["cells"]
    assert cell["crash_at"] == "after-effect:1" and cell["seconds"] < 30
    assert cell["diff"].startswith(
        "the run cannot recover: no retry follows the killed attempt of charge (attempt 1 of at "
        "most 1): the activity fails in the workflow when its start-to-close timeout 300 s expires"
    )

    # Runs that end failed or cancelled by design: the end is part of the state. A crash after
    # the fraud check failed for good (before its failure is recorded) is a point too.
    report = assert_clean(results["declined-keyed"], ["charge", "check_fraud"])
    assert report["reference_end"] == "failed: FraudSuspected: i-1: fraud suspected"
    assert_caught(results["declined-unkeyed"], {"after-effect:1"}, "effects: 1 → 2 entries")
    report = assert_clean(results["cancelled-keyed"], ["charge"])
    assert report["reference_end"] == "cancelled"
    assert_caught(results["cancelled-unkeyed"], {"after-effect:1"}, "effects: 1 → 2 entries")

    # An activity the worker cannot run (its argument does not decode) is reported at once, with
    # its failure, not waited on.
    done, _ = results["broken"]
    assert done.returncode == 2, done.stderr
    assert "activity charge_cents cannot run on this worker" in done.stderr
    assert "Failed decoding arguments" in done.stderr


def test_a_failing_crash_test_as_junit_xml_and_github_errors(
    db_url: str, temporal_address: str, tmp_path: Path
) -> None:
    """Grouped (the default): every failing point ends as a cell of its own, with its recovery;
    the JUnit file has a testcase per point (failures: the ✗ points, with what differs and the
    recovery), the untested point skipped; on GitHub Actions, an ::error line per ✗ point."""
    junit = tmp_path / "crashtest.xml"
    env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address, GITHUB_ACTIONS="true")
    args = [*RUNS["parallel-unkeyed"], "--junit-xml", str(junit)]
    done, report = crashtest_runs({"junit": (args, {})}, env, tmp_path)["junit"]
    assert done.returncode == 1, done.stdout + done.stderr

    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    by_name = {c.get("name", ""): c for c in cases}
    assert len(cases) == len(report["cells"]) + len(report["untested"])
    assert suite.get("tests") == str(len(cases))
    failed = {n.partition(" ")[0] for n, c in by_name.items() if c.find("failure") is not None}
    assert failed == failing(report) == {"after-effect:1", "after-effect:2", "after-effect:3"}
    assert suite.get("failures") == "3" and suite.get("errors") == "0"
    for cell in report["cells"]:
        case = by_name[f"{cell['crash_at']} ({cell['activity']})"]
        failure = case.find("failure")
        if cell["matches"]:
            assert failure is None
            continue
        assert cell["group"] == 1 and cell["recovery_s"] is not None, cell
        assert failure is not None and failure.get("message") == "effects: 4 → 5 entries"
        assert "recovery: " in (failure.text or "") and cell["workflow_id"] in (failure.text or "")
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert [c.get("name") for c in skipped] == [u["boundary"] for u in report["untested"]]
    assert any(c["group"] > 1 for c in report["cells"]), "no point was cleared in a group"

    errors = [line for line in done.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 3, done.stdout
    assert all("::effects: 4 → 5 entries (recovery " in line for line in errors), errors
