"""What a deploy changes that no run fails on: hazards read from the two versions' runs without a
crash, said under a deploy test's table. Temporal replays a step by its activity type and id,
never its input, so each of these passes replay without a nondeterminism error:

- Activity ids that are positions (the SDK's default: 1, 2, 3, ...) while the list of steps
  changed: a run reset, or recovered, on the new code gives a step the id, and so the
  `workflow_id:activity_id` key, an old run gave another step.
- One activity type for several steps (a generic `step(name)`, as agent frameworks run every
  model call or tool through one activity) whose steps changed: a run in flight on the new code
  can be given one step's result for another, run a step twice or skip one.
- A step whose input changed: an attempt scheduled on the old code runs with the old input.

A step is named by its type, or by its type and input where several steps share the type.
"""

from __future__ import annotations

from collections import Counter

from temporal_crashtest._history import Boundary, Tree
from temporal_crashtest._interceptor import ROOT_SCOPE
from temporal_crashtest._text import shown

SHOWN_STEPS = 6
SHOWN_CHANGES = 3


def deploy_hazards(old: Tree, new: Tree) -> list[str]:
    """One line per hazard the deploy from `old` to `new` holds, with where."""
    before, after = _root_steps(old), _root_steps(new)
    counts = Counter(b.activity for b in before) | Counter(b.activity for b in after)
    shared = sorted(t for t, n in counts.items() if n > 1)
    hazards = []
    if (positions := _positions(before, after, shared)) is not None:
        hazards.append(positions)
    hazards += [h for t in shared if (h := _shared_type(t, before, after)) is not None]
    hazards += _changed_inputs(before, after, shared)
    return hazards


def _positions(before: list[Boundary], after: list[Boundary], shared: list[str]) -> str | None:
    """Positional activity ids under a changed list of steps."""
    if not all(b.activity_id.isdigit() for b in [*before, *after]):
        return None
    old, new = _names(before, shared), _names(after, shared)
    moved = [
        f"{i} {a} → {b}" for i, (a, b) in enumerate(zip(old, new, strict=False), start=1) if a != b
    ]
    if not moved:  # steps only added or removed at the end: no id names another step
        return None
    return (
        f"activity ids are positions and the steps changed ({_listed(old)} → {_listed(new)}): "
        f"an id now names another step ({', '.join(moved[:SHOWN_CHANGES])}), so keys of "
        "workflow_id:activity_id move on a reset or a recovery on the new code; give each step "
        "an explicit activity_id"
    )


def _shared_type(kind: str, before: list[Boundary], after: list[Boundary]) -> str | None:
    """One activity type for several steps, whose steps (their inputs, in order) changed."""
    old = [b for b in before if b.activity == kind]
    new = [b for b in after if b.activity == kind]
    if [b.input_digest for b in old] == [b.input_digest for b in new]:
        return None
    return (
        f"one activity type runs several steps and they changed ({kind}: "
        f"{_listed(_inputs(old))} → {_listed(_inputs(new))}): replay matches a step by type and "
        "id, never by input, so no nondeterminism error is raised: a run in flight on the new "
        "code can be given one step's result for another, run a step twice or skip one; give "
        "each step an activity type of its own, or put the change behind workflow.patched"
    )


def _changed_inputs(before: list[Boundary], after: list[Boundary], shared: list[str]) -> list[str]:
    """Steps of a type of their own, under the same activity id, scheduled with another input."""
    by_id = {b.activity_id: b for b in before if b.activity not in shared}
    changed = [
        (old, new)
        for new in after
        if (old := by_id.get(new.activity_id)) is not None
        and old.activity == new.activity
        and old.input_digest != new.input_digest
    ]
    return [
        f"{new.activity} (activity id {shown(new.activity_id)}) takes another input on the new "
        f"code ({_hint(old)} → {_hint(new)}): replay never compares inputs, so an attempt "
        "scheduled on the old code runs with the old input, and no error says so"
        for old, new in changed
    ]


def _root_steps(tree: Tree) -> list[Boundary]:
    """The activities of the root workflow's first run, in scheduling order."""
    return [b for b in tree.boundaries if b.scope == ROOT_SCOPE and not b.local]


def _names(steps: list[Boundary], shared: list[str]) -> list[str]:
    return [f"{b.activity}({_hint(b)})" if b.activity in shared else b.activity for b in steps]


def _inputs(steps: list[Boundary]) -> list[str]:
    return [_hint(b) for b in steps]


def _hint(b: Boundary) -> str:
    return shown(repr(b.input)) if b.input else "…"


def _listed(names: list[str]) -> str:
    return ", ".join(names[:SHOWN_STEPS]) + (" …" if len(names) > SHOWN_STEPS else "")
