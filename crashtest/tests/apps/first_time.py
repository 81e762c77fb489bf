"""Whether a marker file is new: the replays app's memory across worker processes."""

from __future__ import annotations

from pathlib import Path


def first_time(marker: Path) -> bool:
    if marker.exists():
        return False
    marker.touch()
    return True
