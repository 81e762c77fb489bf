"""Deploy crash tests (`--deploy-to`): every run starts on v1 of `Order` and the worker that takes
it over after a kill runs another version (`examples/deploys`). A step inserted without a patch
blocks the run that had scheduled the receipt (a nondeterminism error, ✗ at once); behind
`workflow.patched` each run keeps its path; v1 to v1 is an ordinary crash test. Where the steps
changed under positional activity ids, a note says which id now names another step. Two hazards
no replay catches: one activity type for every step (a step inserted runs the receipt twice,
with no error) and a changed input (every run in one version's state; a note says where). A
rollback (v2_patched to v1) blocks every run that recorded the patch. Each test's replay pass
(no kills) finds where a run in flight would be blocked, and nothing where replay cannot see. A
reset on the patched version sends the receipt twice under positional ids, never under explicit
ones. Every pair of `examples.deploys.pairs` (the stages of Temporal's versioning guide, a step
removed with and without a patch) gets the verdict it must, and a deploy between two source
trees runs each version from its own."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from crashlab.lab import counts, grocery_crashtest_args
from examples.deploys.pairs import PAIRS
from infra.db import ensure_database_url
from tests.helpers import (
    MODULE_BUDGET_S,
    ROOT,
    CrashtestRun,
    child_env,
    crashtest_runs,
    failing,
    prepare_database,
)

OLD = {"effects": ["charge o-1", "receipt for o-1"]}
NEW = {"effects": ["charge o-1", "notice for o-1", "receipt for o-1"]}
# pydantic-ai's agent deployed to itself: its inputs hold times and per-process ids, which two
# runs of the same code never share, and which are no change.
PYDANTIC_AI = "examples.frameworks.pydantic_ai_agent"
FRAMEWORK_TO_ITSELF = [
    "--plugin", "pydantic_ai.durable_exec.temporal:PydanticAIPlugin",
    "--worker", f"{PYDANTIC_AI}:keyed_worker", "--workflow", f"{PYDANTIC_AI}:KeyedOrderAgent",
    "--input", '"milk"', "--observe", "examples.frameworks.effects:effects_of",
    "--deploy-to", f"{PYDANTIC_AI}:keyed_worker", "--points", "after-effect:1",
]  # fmt: skip
BY_NAME = {pair.name: pair for pair in PAIRS}
# The module's crash tests run once, in the first test's setup (`MODULE_BUDGET_S`).
pytestmark = pytest.mark.timeout(MODULE_BUDGET_S)
# The grocery agent: runs start on the release before the price check (numbered by the SDK) and
# are taken over by today's (ids are the steps' own numbers; the check behind a patch), or by
# the check shipped the guide's way (behind a patch, numbered by the SDK).
AGENT_POINTS = ",".join(
    [f"after-effect:{n}" for n in range(1, 7)]
    + [f"after-checkpoint:{n}" for n in range(1, 6)]
    + [f"in-task:{n}" for n in range(1, 7)]
    + [f"reset:{n}" for n in range(1, 7)]
)
RESETS = ",".join(f"reset:{n}" for n in range(1, 7))


def agent_deploy(household: str, to: str, points: str) -> list[str]:
    args = grocery_crashtest_args(household)
    args[args.index("--worker") + 1] = "examples.deploys.grocery:v1_worker"
    return [*args, "--deploy-to", to, "--points", points]


def source_trees(root: Path) -> tuple[Path, Path]:
    """Two checkouts of this project's examples, as CI has the base branch beside the pull
    request: in each, the module `current` of examples/deploys is another version (v1, then
    v2_patched)."""
    trees = root / "old", root / "new"
    for tree, version in zip(trees, ("v1", "v2_patched"), strict=True):
        shutil.copytree(ROOT / "examples", tree / "examples", ignore=IGNORED)
        shutil.copy(tree / "examples" / "deploys" / f"{version}.py", tree / CURRENT)
    return trees


CURRENT = Path("examples/deploys/current.py")
IGNORED = shutil.ignore_patterns("__pycache__")


def from_trees(old: Path, new: Path) -> list[str]:
    """The deploy from one tree to the other, the new version's state pinned
    (`--expect-version new`)."""
    return [
        "--worker", "examples.deploys.current:worker", "--worker-tree", str(old),
        "--workflow", "examples.deploys.v1:Order", "--input", '"o-1"',
        "--observe", "examples.shapes.ledger:effects_of",
        "--deploy-to", "examples.deploys.current:worker", "--deploy-tree", str(new),
        "--points", "after-effect:1,after-effect:2", "--expect-version", "new",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def deploys(
    temporal_address: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, CrashtestRun]:
    """The deploy crash tests, at once: every pair of `examples.deploys.pairs`, a framework
    deployed to itself, and a deploy between two source trees."""
    env = child_env(prepare_database(ensure_database_url()), TEMPORAL_ADDRESS=temporal_address)
    # The pinned pairs first (90 and 127 s, a minute of it the grace a run on its way to a
    # version is given; most others take 20-50 s): neither is then what the module waits on last.
    first = sorted(PAIRS, key=lambda pair: not pair.name.startswith("pinned"))
    runs: dict[str, tuple[list[str], dict[str, str]]] = {
        pair.name: (pair.args(), {}) for pair in first
    }
    runs["framework"] = (FRAMEWORK_TO_ITSELF, {})
    runs["trees"] = (from_trees(*source_trees(tmp_path_factory.mktemp("trees"))), {})
    runs["agent"] = (agent_deploy("deploy-agent", "worker:build_worker", AGENT_POINTS), {})
    runs["agent-by-position"] = (
        agent_deploy("deploy-agent-p", "examples.deploys.grocery:by_position_worker", RESETS),
        {},
    )
    return crashtest_runs(runs, env, tmp_path_factory.mktemp("deploys"), at_once=4)


@pytest.mark.parametrize("name", list(BY_NAME))
def test_each_deploy_gets_its_verdict(deploys: dict[str, CrashtestRun], name: str) -> None:
    """Every deploy done wrong fails exactly where a run in flight meets it; every one done
    right passes at every point."""
    done, report = deploys[name]
    pair = BY_NAME[name]
    assert done.returncode == (1 if pair.failing else 0), done.stdout + done.stderr
    assert failing(report) == set(pair.failing), {c["crash_at"]: c["diff"] for c in report["cells"]}
    assert {c["crash_at"] for c in report["cells"]} == set(pair.points.split(","))


def cells(run: CrashtestRun) -> dict[str, dict[str, Any]]:
    return {c["crash_at"]: c for c in run[1]["cells"]}


def test_a_step_inserted_without_a_patch_blocks_the_run(deploys: dict[str, CrashtestRun]) -> None:
    """Killed after v1 scheduled the receipt, v2's worker expects the notice there: the run's
    workflow task fails with a nondeterminism error, reported with what production would see.
    Killed earlier (the receipt not yet scheduled), the run takes v2's path and passes."""
    done, report = deploys["inserted"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert report["deploy_to"] == "examples.deploys.v2:worker"
    assert (report["reference"], report["deployed_reference"]) == (OLD, NEW)
    assert failing(report) == {"after-effect:2"}
    blocked = cells(deploys["inserted"])["after-effect:2"]
    assert "[TMPRL1100] Nondeterminism error" in blocked["diff"], blocked
    assert "in production the run stays Running" in blocked["diff"], blocked
    assert blocked["observed"] == OLD  # the receipt v1 sent before its worker died
    assert cells(deploys["inserted"])["after-effect:1"]["observed"] == NEW
    assert "deployed to examples.deploys.v2:worker: 1 of 5" in done.stdout
    [hazard] = report["warnings"]  # the default ids are positions: 2 was the receipt's
    assert hazard.startswith("activity ids are positions and the steps changed"), hazard
    assert "(2 send_receipt → send_notice)" in hazard
    # The replay pass, before any kill, finds the same place: a run in flight once the receipt
    # is scheduled.
    charge, receipt = report["replay"]
    assert charge["failure"] is None, charge
    assert receipt["failure"].startswith(
        "[TMPRL1100] Nondeterminism error: Activity type of scheduled event 'send_receipt'"
    ), receipt


def test_a_patched_step_keeps_each_run_on_its_path(deploys: dict[str, CrashtestRun]) -> None:
    """Behind `workflow.patched`: a run v1 took past the receipt keeps v1's path, one killed
    before the notice's place takes v2's; both are a no-crash state."""
    done, report = deploys["patched"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["deployed_reference"] == NEW
    # The patch keeps runs in flight on their path; a reset on v2 still moves keys.
    assert any(w.startswith("activity ids are positions") for w in report["warnings"])
    by_point = cells(deploys["patched"])
    assert by_point["after-effect:2"]["observed"] == OLD
    assert by_point["after-effect:1"]["observed"] == NEW
    assert "end in the no-crash state of either version" in done.stdout
    assert [r["failure"] for r in report["replay"]] == [None, None]


def test_the_same_version_deployed_is_a_plain_crash_test(
    deploys: dict[str, CrashtestRun],
) -> None:
    done, report = deploys["same"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["deployed_reference"] == report["reference"] == OLD
    assert report["warnings"] == []  # the same steps: nothing moved
    assert {c["crash_at"] for c in report["cells"]} == set(BY_NAME["same"].points.split(","))
    assert [r["failure"] for r in report["replay"]] == [None, None]


def test_one_activity_type_for_every_step_hides_an_unpatched_step(
    deploys: dict[str, CrashtestRun],
) -> None:
    """Every step is `step(effect)`: v2 inserts the notice with no patch, and no nondeterminism
    error stops the run v1 killed after its receipt: the receipt scheduled as id 2 comes back as
    the notice's result, and v2 sends the receipt again under id 3 — neither version's state."""
    done, report = deploys["shared-type"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert (report["reference"], report["deployed_reference"]) == (OLD, NEW)
    assert failing(report) == {"after-effect:2"}
    twice = cells(deploys["shared-type"])["after-effect:2"]
    assert twice["observed"] == {"effects": ["charge o-1", "receipt for o-1", "receipt for o-1"]}
    assert "Nondeterminism" not in twice["diff"], twice
    # The two notes of the deploy (a loaded machine may add its own: a timeout no kill caused).
    positions, shared = [w for w in report["warnings"] if "no kill caused" not in w]
    assert "(2 step('receipt for o-1') → step('notice for o-1'))" in positions, positions
    assert shared.startswith("one activity type runs several steps and they changed (step: "), (
        shared
    )
    # Replay matches type and id only: the pass sees nothing; the live cell does.
    assert [r["failure"] for r in report["replay"]] == [None, None]


def test_a_changed_input_is_named_though_every_run_passes(
    deploys: dict[str, CrashtestRun],
) -> None:
    """The receipt's input changed: every cell ends in one version's state (a receipt v1 had
    scheduled keeps v1's input), and the note says which step's input changed."""
    done, report = deploys["input"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["deployed_reference"] == {"effects": ["charge o-1", "receipt for o-1 in EUR"]}
    assert cells(deploys["input"])["after-effect:2"]["observed"] == OLD
    assert report["warnings"] == [
        "send_receipt (activity id 2) takes another input on the new code ('o-1' → 'o-1 in "
        "EUR'): replay never compares inputs, so an attempt scheduled on the old code runs with "
        "the old input, and no error says so"
    ]


def test_a_rollback_blocks_every_run_past_the_patch(deploys: dict[str, CrashtestRun]) -> None:
    """v2_patched rolled back to v1: a run that recorded the patch marker cannot be replayed by
    code without it. Killed after a checkpoint or inside a task, the failed task follows a
    timed-out one, so no history shows the error; the worker tells it, and the cell is ✗ with
    it rather than waiting out its deadline. Killed inside the task that would record the
    marker, the run takes v1's path and passes."""
    done, report = deploys["rollback"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert (report["reference"], report["deployed_reference"]) == (NEW, OLD)
    assert failing(report) == {"after-effect:2", "after-checkpoint:2", "in-task:3"}
    by_point = cells(deploys["rollback"])
    for point in ("after-checkpoint:2", "in-task:3"):
        diff = by_point[point]["diff"]
        assert diff.startswith("the workflow task fails on the worker: [TMPRL1100]"), diff
        assert "patch marker encountered for change notice-before-receipt" in diff, diff
    assert by_point["in-task:2"]["observed"] == OLD
    replayed = {r["activity"]: r["failure"] for r in report["replay"]}
    assert replayed["charge"] is None
    for step in ("send_notice", "send_receipt"):
        assert "patch marker encountered" in replayed[step], replayed


def test_a_framework_deployed_to_itself_has_no_hazard(deploys: dict[str, CrashtestRun]) -> None:
    """Two runs of the same agent differ in times, per-process ids and a set's order: no note
    may call that a change, and every cut replays."""
    done, report = deploys["framework"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["warnings"] == []
    assert report["replay"] and all(r["failure"] is None for r in report["replay"])


def test_a_reset_on_the_patched_version_sends_the_receipt_twice(
    deploys: dict[str, CrashtestRun],
) -> None:
    """v2 done right (behind a patch), then a reset on v2 — an operator's usual fix: the reset
    run takes v2's path, the notice takes id 2 and so the receipt's key (it is refused as done),
    and the receipt runs again under id 3. The positional-id note names the key that moved."""
    done, report = deploys["reset-positional"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert failing(report) == {"reset:1", "reset:2"}
    twice = {"effects": ["charge o-1", "receipt for o-1", "receipt for o-1"]}
    assert all(c["observed"] == twice for c in report["cells"]), report["cells"]
    [moved] = report["warnings"]
    assert "(2 send_receipt → send_notice)" in moved and "move on a reset" in moved, moved


def test_explicit_activity_ids_keep_every_key_on_its_step(
    deploys: dict[str, CrashtestRun],
) -> None:
    """The same deploy with an id per step: resets and kills alike end in one version's state,
    and no note is needed."""
    done, report = deploys["reset-explicit-ids"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["warnings"] == []
    by_point = cells(deploys["reset-explicit-ids"])
    assert by_point["reset:2"]["observed"] == {"effects": sorted(NEW["effects"])}


def test_a_deploy_between_source_trees_runs_each_version_from_its_own(
    deploys: dict[str, CrashtestRun],
) -> None:
    """The same module name in two trees (the base branch and the pull request): every run
    starts on the old tree's v1, the worker that takes over runs the new tree's v2_patched, each
    version in processes of its own. With the new version pinned (`--expect-version new`), a run
    v1 took past the receipt is ✗ (it keeps v1's path), one killed before it takes v2's."""
    done, report = deploys["trees"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert (report["reference"], report["deployed_reference"]) == (OLD, NEW)
    assert report["deploy_to"].endswith("/new"), report["deploy_to"]
    assert report["pinned"] == "new"
    by_point = cells(deploys["trees"])
    assert by_point["after-effect:1"]["observed"] == NEW
    assert by_point["after-effect:2"]["observed"] == OLD
    assert by_point["after-effect:2"]["diff"].startswith("new version (pinned): "), by_point
    assert "do not end in the no-crash state of the new version" in done.stdout


def test_a_run_deployed_to_while_it_sleeps_wakes_on_the_new_code(
    deploys: dict[str, CrashtestRun],
) -> None:
    """A reminder a week after sign-up, deployed while runs sleep (time skipped): the worker is
    killed while the run waits on its timer, and v2's worker takes it when the timer fires. v2
    inserted a welcome before the sleep without a patch: replaying v1's history it schedules
    the welcome where v1 started the timer, and the run is blocked (✗ at the wait and in the
    task the timer wakes); behind `workflow.patched` it sleeps on and sends the reminder (✓).
    Killed before the sleep, either v2 takes its own path."""
    asleep = cells(deploys["asleep"])
    assert asleep["wait:2"]["activity"] == "send_reminder, after a timer of 7 days"
    for point in ("wait:2", "in-task:2"):
        assert "[TMPRL1100] Nondeterminism error" in asleep[point]["diff"], asleep[point]
    assert asleep["after-effect:1"]["observed"] == {
        "effects": ["account of o-1", "welcome to o-1", "reminder to o-1"]
    }
    patched = cells(deploys["asleep-patched"])
    assert patched["wait:2"]["observed"] == {"effects": ["account of o-1", "reminder to o-1"]}
    assert "the timer of 7 days (time skipping)" in patched["wait:2"]["waited_on"]


def test_a_pinned_run_whose_version_is_gone_is_reported_hanging(
    deploys: dict[str, CrashtestRun],
) -> None:
    """Worker Versioning, every run pinned: after the kill, no worker of v1 is left and v2's
    does not take v1's runs. Each cell is ✗ "hanging" as soon as the taking-over worker polls,
    never ✓ and not at the deadline — but one killed inside its first workflow task, pinned to
    nothing yet, which moves to v2 once v2's worker polls and is made current, as a deploy does
    (✓: while v2's worker failed to be made current, it was called "on its way to v1"; and,
    on a loaded machine, while its call to make v2 current was still under way after 20 s).
    Where v2's worker polls but v1 stays current (a deploy that forgot to switch), that run is
    ✗ "on its way to v1" once the live worker has been up for the grace."""
    done, report = deploys["pinned"]
    by_point = cells(deploys["pinned"])
    assert by_point["in-task:1"]["matches"], by_point["in-task:1"]["diff"]
    assert by_point["in-task:1"]["observed"] == NEW
    hanging = [c for c in report["cells"] if c["crash_at"] != "in-task:1"]
    assert hanging and done.returncode == 1
    for cell in hanging:
        assert cell["diff"].startswith("hanging: the run is pinned to version v1"), cell
        assert "no worker of it is left (the worker that took over is v2)" in cell["diff"], cell
    # v2 polls but is never made current: the same run stays on its way to v1, hanging.
    forgot = cells(deploys["pinned-not-current"])["in-task:1"]
    assert forgot["diff"].startswith("hanging: the run is on its way to version v1"), forgot
    assert "v1 is still the deployment's current version: make the new one" in forgot["diff"]


def test_the_agent_survives_its_own_deploy_and_a_reset_on_it(
    deploys: dict[str, CrashtestRun],
) -> None:
    """v1 of the grocery agent taken over by today's at every crash moment, and reset to every
    step on it: each run ends in one version's no-crash state (3 model calls, 1 order, 1 email),
    its keys on their steps (the ids are the steps' own numbers, the price check 7)."""
    done, report = deploys["agent"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(report["cells"]) == len(AGENT_POINTS.split(","))
    assert counts(report["reference"]) == counts(report["deployed_reference"]) == (3, 1, 1)
    assert report["warnings"] == []  # no id names another step
    assert all(r["failure"] is None for r in report["replay"])


def test_the_agent_shipped_with_numbered_ids_orders_twice_on_a_reset(
    deploys: dict[str, CrashtestRun],
) -> None:
    """The price check behind a patch, as Temporal's guide ships a step, with the SDK numbering
    the activities: reset on it to before the order, a run takes the check as id 4 — the
    order's key — and orders, emails and summarises again: 4 model calls, 2 orders, 2 emails.
    The note names the key that moved."""
    done, report = deploys["agent-by-position"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert failing(report) == {"reset:1", "reset:2", "reset:3", "reset:4"}
    for cell in report["cells"]:
        if not cell["matches"]:
            assert counts(cell["observed"]) == (4, 2, 2), cell
    [moved] = report["warnings"]
    assert "(4 place_order → check_prices, 5 send_confirmation → place_order" in moved, moved
