"""Recovery after each worker kill: the time until every run the killed process held made
progress again.

What a process held comes from its own log, written as it worked: a Temporal worker logs `activity
started: WORKFLOW_ID ...` and `activity ended (...): WORKFLOW_ID ...` (crashlab.pauses, which
`python -m crashlab.worker` installs from STEP_PAUSE_MS); a journal process logs `run RUN_ID:
opened ...` and `run RUN_ID: completed` (journal.engine). Progress is the next time the run
completed an activity (from its Temporal history) or saved a step (from agent_steps).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence

from crashlab.faults import Injected
from infra.reporting import p99

_ACTIVITY = re.compile(r"activity (started|ended \(\w+\)): (\S+ \S+ \S+ attempt \d+)")
_RUN = re.compile(r"run (\S+?):? (opened|completed|failed)")


def held_by(log_text: str) -> set[str]:
    """The runs a process was in the middle of when its log stopped."""
    open_: dict[str, str] = {}  # what it started -> the run
    for match in _ACTIVITY.finditer(log_text):
        kind, what = match.groups()
        if kind == "started":
            open_[what] = what.split()[0]
        else:
            open_.pop(what, None)
    for match in _RUN.finditer(log_text):
        run_id, kind = match.groups()
        if kind == "opened":
            open_[run_id] = run_id
        else:
            open_.pop(run_id, None)
    return set(open_.values())


def recovery_seconds(
    kill: Injected, held: set[str], progress: Mapping[str, Sequence[float]]
) -> float | None:
    """The time from the kill until the last of the held runs made progress (None: it held
    none, or one never progressed, which the invariants report)."""
    waits = []
    for run_id in held:
        after = [t for t in progress.get(run_id, ()) if t > kill.at]
        if not after:
            return None
        waits.append(min(after) - kill.at)
    return max(waits) if waits else None


def summary_ms(samples_s: list[float]) -> dict[str, float] | None:
    if not samples_s:
        return None
    ms = [s * 1000 for s in samples_s]
    return {"median": round(statistics.median(ms)), "p99": round(p99(ms)), "max": round(max(ms))}
