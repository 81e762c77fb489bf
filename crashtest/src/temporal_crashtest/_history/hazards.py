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
  The two runs differ in what each run makes its own (an order id an earlier step returned, a
  `workflow.now()`, a `workflow.uuid4()`, the workflow's own id): those are not changes.

A step is named by its type, or by its type and input where several steps share the type.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType

from temporal_crashtest._history.tree import GENERATED, Boundary, Tree
from temporal_crashtest._points.sites import ROOT_SCOPE
from temporal_crashtest._text import shown

SHOWN_STEPS = 6
SHOWN_CHANGES = 3


def deploy_hazards(old: Tree, new: Tree) -> list[str]:
    """One line per hazard the deploy from `old` to `new` holds, with where."""
    before, after = _root_steps(old), _root_steps(new)
    counts = Counter(b.activity for b in before) | Counter(b.activity for b in after)
    shared = sorted(t for t, n in counts.items() if n > 1)
    flows = (_Flow.of(old), _Flow.of(new))
    hazards = []
    if (positions := _positions(flows, before, after, shared)) is not None:
        hazards.append(positions)
    hazards += [h for t in shared if (h := _shared_type(t, flows, before, after)) is not None]
    hazards += _changed_inputs(flows, before, after, shared)
    return hazards


def _positions(
    flows: tuple[_Flow, _Flow], before: list[Boundary], after: list[Boundary], shared: list[str]
) -> str | None:
    """An activity id that names another step on the new code (a step of a shared type is
    another step when its input differs, `_Flow.differs`): what positional ids do when the list
    of steps changes. Explicit ids that keep every step's id (a new step, a new id) hold none."""
    old, new = _names(before, shared), _names(after, shared)
    named_new = {b.activity_id: (b, name) for b, name in zip(after, new, strict=True)}
    moved = []
    for a, name in zip(before, old, strict=True):
        if a.activity_id not in named_new:
            continue
        b, other = named_new[a.activity_id]
        if a.activity != b.activity or (a.activity in shared and _another_input(flows, a, b)):
            moved.append(f"{a.activity_id} {name} → {other}")
    if not moved:  # steps only added or removed at the end, or each step kept its id
        return None
    numbered = all(b.activity_id == str(i) for steps in (before, after) for i, b in
                   enumerate(steps, start=1))  # fmt: skip
    what = "activity ids are positions" if numbered else "activity ids moved between steps"
    return (
        f"{what} and the steps changed ({_listed(old)} → {_listed(new)}): "
        f"an id now names another step ({', '.join(moved[:SHOWN_CHANGES])}), so keys of "
        "workflow_id:activity_id move on a reset or a recovery on the new code; give each step "
        "an explicit activity_id of its own, never reused"
    )


def _shared_type(
    kind: str, flows: tuple[_Flow, _Flow], before: list[Boundary], after: list[Boundary]
) -> str | None:
    """One activity type for several steps, whose steps (their inputs, in order) changed."""
    old = [b for b in before if b.activity == kind]
    new = [b for b in after if b.activity == kind]
    pairs = zip(old, new, strict=False)  # of equal length when it matters
    if len(old) == len(new) and not any(_another_input(flows, a, b) for a, b in pairs):
        return None
    return (
        f"one activity type runs several steps and they changed ({kind}: "
        f"{_listed(_inputs(old))} → {_listed(_inputs(new))}): replay matches a step by type and "
        "id, never by input, so no nondeterminism error is raised: a run in flight on the new "
        "code can be given one step's result for another, run a step twice or skip one; give "
        "each step an activity type of its own, or put the change behind workflow.patched"
    )


def _changed_inputs(
    flows: tuple[_Flow, _Flow], before: list[Boundary], after: list[Boundary], shared: list[str]
) -> list[str]:
    """Steps of a type of their own, under the same activity id, scheduled with another input
    (`_another_input`)."""
    by_id = {b.activity_id: b for b in before if b.activity not in shared}
    changed = [
        (old, new)
        for new in after
        if (old := by_id.get(new.activity_id)) is not None
        and old.activity == new.activity
        and _another_input(flows, old, new)
    ]
    return [
        f"{new.activity} (activity id {shown(new.activity_id)}) takes another input on the new "
        f"code ({_hint(old)} → {_hint(new)}): replay never compares inputs, so an attempt "
        "scheduled on the old code runs with the old input, and no error says so"
        for old, new in changed
    ]


def _another_input(flows: tuple[_Flow, _Flow], old: Boundary, new: Boundary) -> bool:
    """Whether `new` was scheduled with another input than `old`: its hint (the input's first
    strings) differs, times and uuids aside, and so does a leaf of it (`_Flow.differs`). Two
    runs of the same code differ in more than a person would call a change (a framework's
    per-process ids, the order of a set): the hint keeps that out, at the cost of a change
    past the hint's first strings going unnamed."""
    if old.input_digest == new.input_digest:
        return False
    if GENERATED.sub("<generated>", old.input) == GENERATED.sub("<generated>", new.input):
        return False
    return flows[0].differs(flows[1], old.activity_id, new.activity_id)


@dataclass(frozen=True)
class _Flow:
    """What the root's first run passed its activities (each input's leaves, by activity id) and
    what they returned (every leaf of every result), its own workflow and run ids masked."""

    inputs: dict[str, dict[tuple[str, ...], str]]
    returned: frozenset[str]

    @classmethod
    def of(cls, tree: Tree) -> _Flow:
        root = tree.run(ROOT_SCOPE)
        if root is None:
            return cls({}, frozenset())
        masks = (root.workflow_id, root.run_id)
        inputs: dict[str, dict[tuple[str, ...], str]] = {}
        returned: set[str] = set()
        for e in root.history.events:
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                a = e.activity_task_scheduled_event_attributes
                inputs[a.activity_id] = _leaves(_values(a.input.payloads, masks))
            elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                result = e.activity_task_completed_event_attributes.result.payloads
                returned |= set(_leaves(_values(result, masks)).values())
        return cls(inputs, frozenset(returned))

    def differs(self, new: _Flow, old_id: str, new_id: str) -> bool:
        """Whether the input of `old_id` here and of `new_id` in `new` differ in a leaf that
        neither came from an earlier step's result in each run (an order id, say) nor is an id
        or a time."""
        old_leaves, new_leaves = self.inputs.get(old_id, {}), new.inputs.get(new_id, {})
        for path in old_leaves.keys() | new_leaves.keys():
            was, now = old_leaves.get(path), new_leaves.get(path)
            if was == now:
                continue
            if was is None or now is None:
                return True  # the input's shape changed
            if was in self.returned and now in new.returned:
                continue
            return True
        return False


def _values(payloads: Sequence[Payload], masks: tuple[str, ...]) -> list[Any]:
    """The payloads as JSON values (one that is not JSON as its text), the masks replaced."""
    values = []
    for payload in payloads:
        text = payload.data.decode(errors="replace")
        for mask in masks:
            text = text.replace(mask, "<masked>") if mask else text
        try:
            values.append(json.loads(text))
        except ValueError:
            values.append(text)
    return values


def _leaves(value: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], str]:
    """Every scalar of `value` by its path, as JSON text, its times and uuids `<generated>`."""
    if isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        found: dict[tuple[str, ...], str] = {}
        for key, inner in items:
            found |= _leaves(inner, (*path, str(key)))
        return found
    return {path: GENERATED.sub("<generated>", json.dumps(value))}


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
