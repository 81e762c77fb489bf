"""The agent's releases, for the engines whose versions are code paths of one process: the
journal and DBOS (Temporal's are workflow classes: `workflows.grocery_v1`, `workflows.grocery`).

A process runs one release (`--release`, default today's); the crash lab's deploy matrix kills a
process of one release and resumes the run in a process of another, as a deploy does.
"""

from __future__ import annotations

from enum import StrEnum

from infra.config import parse_choice

PRICE_CHECK = "price-check"  # the patch (Temporal's, DBOS's) that brought the price check


class Release(StrEnum):
    BEFORE = "before"  # the six steps: the release before the price check
    TODAY = "today"  # the price check before the order, behind the engine's versioning
    # The price check inserted with no versioning at all: a deploy done wrong (the lab's).
    UNVERSIONED = "unversioned"

    @classmethod
    def parse(cls, text: str) -> Release:
        return parse_choice(cls, text, "release")
