"""The replay pass's search (`_worker.replay._first_blocked`), in process: a cut holds every
shorter one, so the first blocked cut is found in log2(cuts) replays and every other cut's answer
follows."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporal_crashtest._worker.replay import Replayed, _first_blocked


def search(cuts: int, blocked_from: int | None) -> tuple[list[Replayed], list[int]]:
    rows = [{"label": f"step#{i}"} for i in range(cuts)]
    asked: list[int] = []

    async def replay(row: dict[str, Any]) -> Replayed:
        i = rows.index(row)
        asked.append(i)
        failure = "[TMPRL1100] blocked" if blocked_from is not None and i >= blocked_from else None
        return Replayed(label=row["label"], failure=failure, ms=1.0)

    return asyncio.run(_first_blocked(rows, replay)), asked


@pytest.mark.parametrize("blocked_from", [0, 1, 99, 137, 199])
def test_the_first_blocked_cut_in_log2_replays(blocked_from: int) -> None:
    found, asked = search(200, blocked_from)
    assert len(asked) <= 9, asked  # the longest cut, then 8 halvings of 200
    assert [r.failure is not None for r in found] == [i >= blocked_from for i in range(200)]
    assert all(r.failure == "[TMPRL1100] blocked" for r in found[blocked_from:])
    assert {i for i, r in enumerate(found) if r.ms is not None} == set(asked)


def test_a_deploy_that_replays_costs_one_replay() -> None:
    found, asked = search(200, None)
    assert asked == [199] and all(r.failure is None for r in found)


def test_no_cuts_no_replay() -> None:
    assert search(0, None) == ([], [])
