"""What a deploy changes that no run fails on: hazards read from the two versions' runs without a
crash, said under a deploy test's table.

- Activity ids that are positions (the SDK's default: 1, 2, 3, ...) while the list of steps
  changed: a run reset, or recovered, on the new code gives a step the id, and so the
  `workflow_id:activity_id` key, an old run gave another step.
"""

from __future__ import annotations

from temporal_crashtest._history import Boundary, Tree
from temporal_crashtest._interceptor import ROOT_SCOPE

SHOWN_STEPS = 6


def deploy_hazards(old: Tree, new: Tree) -> list[str]:
    """One line per hazard the deploy from `old` to `new` holds, with where."""
    hazards = []
    before, after = _root_steps(old), _root_steps(new)
    positional = all(b.activity_id.isdigit() for b in [*before, *after])
    if positional and [b.activity for b in before] != [b.activity for b in after]:
        moved = [
            f"{i} {a.activity} → {b.activity}"
            for i, (a, b) in enumerate(zip(before, after, strict=False), start=1)
            if a.activity != b.activity
        ]
        hazards.append(
            f"activity ids are positions and the steps changed ({_steps(before)} → "
            f"{_steps(after)}): an id now names another step ({', '.join(moved[:3])}), so keys "
            "of workflow_id:activity_id move on a reset or a recovery on the new code; give "
            "each step an explicit activity_id"
        )
    return hazards


def _root_steps(tree: Tree) -> list[Boundary]:
    """The activities of the root workflow's first run, in scheduling order."""
    return [b for b in tree.boundaries if b.scope == ROOT_SCOPE and not b.local]


def _steps(boundaries: list[Boundary]) -> str:
    names = [b.activity for b in boundaries]
    return ", ".join(names[:SHOWN_STEPS]) + (" …" if len(names) > SHOWN_STEPS else "")
