"""Every deploy this folder shows, as a pair of versions of `Order` (the run starts on `old`; the
worker that takes it over after a kill runs `new`), with the crash points tested and the ones
that must fail: a deploy done wrong visibly fails, one done right passes.

`python -m examples.deploys` crash-tests every pair and prints the table (crashtest's README);
`tests/test_deploys.py` runs the same pairs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

POINTS = "after-effect:1,after-effect:2,after-checkpoint:1,in-task:1,in-task:2"
# A reminder a week after sign-up: before the sleep, while it sleeps, in the task the timer wakes.
SLEEP_POINTS = "after-effect:1,after-checkpoint:1,wait:2,in-task:2"
# After a rollback from v2_patched, the receipt is the third step.
ROLLBACK_POINTS = "after-effect:1,after-effect:2,after-checkpoint:2,in-task:2,in-task:3"
IDS_POINTS = "reset:1,reset:2,after-effect:1,after-effect:2,in-task:2"


@dataclass(frozen=True)
class Pair:
    """A deploy from `old` to `new` (modules of `examples.deploys`), what it shows, and the crash
    points that must not end in either version's no-crash state."""

    name: str
    old: str
    new: str
    what: str
    failing: frozenset[str] = frozenset()
    points: str = POINTS
    observe: str = "examples.shapes.ledger:effects_of"
    more: tuple[str, ...] = ()  # more of the crash test's arguments

    def args(self) -> list[str]:
        """`python -m temporal_crashtest run`'s arguments for this deploy."""
        return [
            "--worker", f"examples.deploys.{self.old}:worker",
            "--workflow", f"examples.deploys.{self.old}:Order",
            "--input", json.dumps("o-1"), "--observe", self.observe,
            "--deploy-to", f"examples.deploys.{self.new}:worker", "--points", self.points,
            *self.more,
        ]  # fmt: skip


AFTER_THE_RECEIPT = frozenset({"after-effect:2"})
PAIRS = [
    Pair("same", "v1", "v1", "the same version: a plain crash test"),
    Pair("inserted", "v1", "v2", "a step inserted without a patch", AFTER_THE_RECEIPT),
    Pair("patched", "v1", "v2_patched", "the step behind workflow.patched (guide stage 2)"),
    Pair("deprecated", "v2_patched", "v3_deprecated", "the patch deprecated (stage 3)"),
    Pair(
        "deprecated-early",
        "v1",
        "v3_deprecated",
        "the patch deprecated while v1 runs are in flight",
        AFTER_THE_RECEIPT,
    ),
    Pair("removed-patch", "v3_deprecated", "v4_removed", "the deprecated patch removed (stage 4)"),
    Pair(
        "removed-patch-early",
        "v2_patched",
        "v4_removed",
        "the patch removed without deprecating it first",
        AFTER_THE_RECEIPT,  # the notice's place: v2_patched's second step
    ),
    Pair(
        "rollback",
        "v2_patched",
        "v1",
        "a rollback: the patched version to the one before",
        frozenset({"after-effect:2", "after-checkpoint:2", "in-task:3"}),
        ROLLBACK_POINTS,
    ),
    Pair("step-removed", "v1", "removed", "a step removed without a patch", AFTER_THE_RECEIPT),
    Pair("step-removed-patched", "v1", "removed_patched", "a step removed behind a patch"),
    Pair(
        "shared-type",
        "generic_v1",
        "generic_v2",
        "one activity type for every step, a step inserted without a patch",
        AFTER_THE_RECEIPT,
    ),
    Pair("input", "v1", "v2_input", "an activity's input changed"),
    Pair(
        "reset-positional",
        "v1",
        "v2_patched",
        "a reset on the patched version, positional activity ids",
        frozenset({"reset:1", "reset:2"}),
        "reset:1,reset:2",
    ),
    Pair(
        "pinned",
        "pinned_v1",
        "pinned_v2",
        "Worker Versioning, pinned: the old version's last worker gone",
        # every run pinned to v1 waits for a v1 worker: hanging (one killed in its first task
        # is pinned to nothing yet and moves to v2)
        frozenset(POINTS.split(",")) - {"in-task:1"},
    ),
    Pair(
        "pinned-not-current",
        "pinned_v1",
        "pinned_v2_not_current",
        "Worker Versioning, pinned: the new version never made current",
        # killed in its first task, the run is on its way to v1, still current, with no worker
        frozenset({"in-task:1"}),
        "in-task:1",
    ),
    Pair(
        "reset-explicit-ids",
        "ids_v1",
        "ids_v2_patched",
        "a reset and kills on the patched version, an explicit id per step",
        points=IDS_POINTS,
        observe="examples.shapes.ledger:effects_in_any_order",
    ),
    Pair(
        "asleep",
        "sleep_v1",
        "sleep_v2",
        "a step inserted before a week's sleep, no patch: deployed while a run sleeps",
        frozenset({"wait:2", "in-task:2"}),  # woken on v2: [TMPRL1100], blocked
        points=SLEEP_POINTS,
    ),
    Pair(
        "asleep-patched",
        "sleep_v1",
        "sleep_v2_patched",
        "the step before the sleep behind workflow.patched",
        points=SLEEP_POINTS,
    ),
]
