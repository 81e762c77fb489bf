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

from temporal_crashtest._errors import InputError
from temporal_crashtest._plan.groups import cut, groupable, run_order
from temporal_crashtest._plan.reference import CellPoint

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
            parts = cut(kind, n)
            mine += parts[k - 1] if k <= len(parts) else []
    return mine
