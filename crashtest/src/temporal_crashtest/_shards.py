"""A crash test spread over CI machines: `--shard K/N` and `merge`.

`shard_points` gives shard K of N its share of the crash points, deterministically: the points in
the order the run without a crash reached them (`run_order`), taken kind by kind (kills after an
effect, kills that hold a workflow task, runs of their own: resets and repeats), each kind cut
into N runs of consecutive points of about equal weight. So every point is in exactly one shard,
the points a group would crash together stay in one shard, and each shard has about its share of
each kind. Each shard makes its own run without a crash (its reference) and stands alone: its
table, JSON and JUnit hold its points, its exit code says whether they passed.

`merge_reports` puts the shards' JSON reports back together: the same workflow, reference,
shard count and plan (the crash points of the whole test, which every shard carries), every
shard present once, and between them every point of the plan exactly once — tested, or not
reached (listed as not tested) — and none both tested and listed as not tested; the cells in the
order of the boundaries; exit as one report would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from temporal_crashtest._errors import InputError
from temporal_crashtest._groups import _cut, groupable, run_order
from temporal_crashtest._model import CellPoint
from temporal_crashtest._points import Moment
from temporal_crashtest._report import NOT_REACHED, Cell, Report, Untested

_SHARD = re.compile(r"(\d+)/(\d+)")
MAX_SHARDS = 256


def parse_shard(text: str) -> tuple[int, int]:
    """`K/N` (1 <= K <= N): shard K of N; anything else is one InputError."""
    found = _SHARD.fullmatch(text.strip())
    if found is None:
        raise InputError(f"--shard {text!r}: expected K/N, e.g. 2/4 (shard 2 of 4)")
    k, n = int(found.group(1)), int(found.group(2))
    if not 1 <= k <= n <= MAX_SHARDS:
        raise InputError(f"--shard {text}: K must be 1 to N, and N at most {MAX_SHARDS}")
    return k, n


def shard_points(points: Sequence[CellPoint], k: int, n: int) -> list[CellPoint]:
    """Shard k of n's crash points (1-based), in run order."""
    ordered = run_order(list(points))
    kinds = [
        [p for p in ordered if groupable(p) and not p.holds_a_task],
        [p for p in ordered if groupable(p) and p.holds_a_task],
        [p for p in ordered if not groupable(p)],
    ]
    mine: list[CellPoint] = []
    for kind in kinds:
        if len(kind) < n:  # fewer points than shards: the first shards get one each
            mine += kind[k - 1 : k]
        else:
            parts = _cut(kind, n)
            mine += parts[k - 1] if k <= len(parts) else []
    return mine


_MOMENTS = [m.value for m in Moment]


def _cell_order(report: Report) -> dict[str, int]:
    """A crash point's place: by boundary, then moment, then effect (`effect:3.2`), then repeat
    (`after-effect:3*2`)."""

    def whole(text: str, default: int) -> int:
        return int(text) if text.isascii() and text.isdigit() else default

    def key(crash_at: str) -> tuple[int, int, int, int]:
        moment, _, rest = crash_at.partition(":")
        place, _, repeat = rest.partition("*")
        number, _, effect = place.partition(".")
        where = _MOMENTS.index(moment) if moment in _MOMENTS else len(_MOMENTS)
        return (whole(number, 0), where, whole(effect, 0), whole(repeat, 1))

    names = sorted({c.crash_at for c in report.cells}, key=key)
    return {name: i for i, name in enumerate(names)}


# What every shard of one crash test shares: the workflow and its input (the reference), the
# versions, the crash points chosen (the plan), the mode.
_SAME_IN_EVERY_SHARD = (
    "workflow",
    "activities",
    "reference",
    "reference_end",
    "deploy_to",
    "deployed_reference",
    "pinned",
    "plan",
    "real_timeouts",
)


def merge_reports(reports: Sequence[tuple[str, Report]]) -> Report:
    """One report from the shards' (named by where each came from): InputError when they are
    not the shards of one crash test, or one is missing or given twice."""
    if not reports:
        raise InputError("merge: no report given")
    first_name, first = reports[0]
    seen: dict[int, str] = {}
    total = None
    for name, report in reports:
        if report.shard is None:
            raise InputError(f"merge: {name} is not a shard's report (made without --shard)")
        k, n = parse_shard(report.shard)
        total = n if total is None else total
        if n != total:
            raise InputError(f"merge: {name} is shard {report.shard}, {first_name} of {total}")
        if k in seen:
            raise InputError(f"merge: shard {k}/{n} is given twice ({seen[k]}, {name})")
        seen[k] = name
        for what in _SAME_IN_EVERY_SHARD:
            if getattr(report, what) != getattr(first, what):
                raise InputError(
                    f"merge: {name} and {first_name} differ in their {what}: not the shards of "
                    "one crash test (the same workflow, input, versions, points and mode)"
                )
    assert total is not None
    missing = [f"{k}/{total}" for k in range(1, total + 1) if k not in seen]
    if missing:
        raise InputError(f"merge: shard {', '.join(missing)} is missing")
    cells: list[Cell] = [c for _, r in reports for c in r.cells]
    _check_the_plan(first.plan, cells, [u for _, r in reports for u in r.untested])
    merged = replace(
        first,
        cells=cells,
        seconds=max(r.seconds for _, r in reports),
        warnings=list(dict.fromkeys(w for _, r in reports for w in r.warnings)),
        untested=list({(u.boundary, u.why): u for _, r in reports for u in r.untested}.values()),
        logs=None,
        runs=sum(r.runs for _, r in reports),
        groups=sum(r.groups for _, r in reports),
        shard=None,
        plan=[],
        timelines={k: v for _, r in reports for k, v in r.timelines.items()},
    )
    order = _cell_order(merged)
    merged.cells = sorted(cells, key=lambda c: order[c.crash_at])
    return merged


def _check_the_plan(plan: list[str], cells: list[Cell], untested: list[Untested]) -> None:
    """Between them the shards made every point of the plan once, as a cell or listed as not
    reached, and none both; InputError naming the first point that is not so."""
    tested = [c.crash_at for c in cells]
    listed = {u.boundary.split(" ", 1)[0]: u.why for u in untested}
    unreached = [p for p, why in listed.items() if why.startswith(NOT_REACHED)]
    if twice := sorted({p for p in tested if tested.count(p) > 1}):
        raise InputError(f"merge: {twice[0]} is in two shards: not one crash test's shards")
    if both := sorted(set(tested) & set(listed)):
        raise InputError(
            f"merge: {both[0]} is both tested and listed as not tested: a report was edited"
        )
    made = set(tested) | set(unreached)
    if extra := sorted(made - set(plan)):
        raise InputError(
            f"merge: {extra[0]} is not among the crash points every shard names (its plan): "
            "not one crash test's shards"
        )
    if missing := [p for p in plan if p not in made]:
        raise InputError(
            f"merge: the shards make {len(made)} of the plan's {len(plan)} crash points "
            f"({missing[0]} in none): a shard's run did not finish or was edited"
        )
