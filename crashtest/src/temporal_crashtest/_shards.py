"""A crash test spread over CI machines: `--shard K/N` and `merge`.

`shard_points` gives shard K of N its share of the crash points, deterministically: the points in
the order the run without a crash reached them (`run_order`), taken kind by kind (kills after an
effect, kills that hold a workflow task, runs of their own: resets and repeats), each kind cut
into N runs of consecutive points of about equal weight. So every point is in exactly one shard,
the points a group would crash together stay in one shard, and each shard has about its share of
each kind. Each shard makes its own run without a crash (its reference) and stands alone: its
table, JSON and JUnit hold its points, its exit code says whether they passed.

`merge_reports` puts the shards' JSON reports back together: the same workflow, reference and
shard count, every shard present once; the cells in the order of the boundaries; exit as one
report would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from temporal_crashtest._errors import InputError
from temporal_crashtest._groups import _cut, groupable, run_order
from temporal_crashtest._model import CellPoint
from temporal_crashtest._points import Moment
from temporal_crashtest._report import Cell, Report

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
# versions, the crash points chosen (so their count and what was left untested), the mode.
_SAME_IN_EVERY_SHARD = (
    "workflow",
    "activities",
    "reference",
    "reference_end",
    "deploy_to",
    "deployed_reference",
    "pinned",
    "points_in_all",
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
    if len(cells) != first.points_in_all:  # a shard cut short, or one that tested none
        raise InputError(
            f"merge: the shards hold {len(cells)} crash points, but each says the test has "
            f"{first.points_in_all}: a shard's run did not finish or was edited"
        )
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
        points_in_all=len(cells),
        timelines={k: v for _, r in reports for k, v in r.timelines.items()},
    )
    order = _cell_order(merged)
    merged.cells = sorted(cells, key=lambda c: order[c.crash_at])
    if len(order) != len(cells):
        raise InputError("merge: a crash point is in two shards: not one crash test's shards")
    return merged
