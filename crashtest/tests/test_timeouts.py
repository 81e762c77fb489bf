"""A fast-forward never changes the outcome: at every combination of timeouts and retries an
activity can have (tests/apps/timeouts_app.py), the verdict with the fast-forward equals the one
that waits production's timeouts out (`--real-timeouts`). An activity with only a
schedule-to-close timeout once passed fast-forwarded and failed for real: its killed attempt's
timeout is the whole window, so no retry follows."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import APPS
from temporal_crashtest._history.attempts import pending_end
from temporalio.api.workflow.v1 import PendingActivityInfo

sys.path.insert(0, str(APPS))
from timeouts_app import TIMEOUTS

# Which combinations fail in production when the worker dies after the activity's effect.
FAILS = {"schedule-to-close only", "both, no room for a retry", "one attempt"}


def test_fast_forwarded_and_real_timeouts_agree_at_every_combination(
    app_env: dict[str, str], tmp_path: Path
) -> None:
    points = ",".join(f"after-effect:{n}" for n in range(1, len(TIMEOUTS) + 1))
    args = ["--worker", "timeouts_app:build", "--workflow", "timeouts_app:TimeoutsWorkflow",
            "--input", json.dumps(list(TIMEOUTS)), "--observe", "timeouts_app:notes_of",
            "--points", points]  # fmt: skip
    modes = {"fast": [], "real": ["--real-timeouts"]}
    procs = {}
    for mode, extra in modes.items():
        command = [sys.executable, "-m", "temporal_crashtest", "run", *args, *extra,
                   "--json", str(tmp_path / f"{mode}.json")]  # fmt: skip
        procs[mode] = subprocess.Popen(command, env={**app_env, "NOTES_KEYED": "1"}, cwd=tmp_path,
                                       text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    verdicts = {}
    for mode, proc in procs.items():
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 1, err
        cells = json.loads((tmp_path / f"{mode}.json").read_text())["cells"]
        verdicts[mode] = {list(TIMEOUTS)[int(c["crash_at"].split(":")[1]) - 1]: c["matches"]
                          for c in cells}  # fmt: skip
    expected = {name: name not in FAILS for name in TIMEOUTS}
    assert verdicts["fast"] == expected
    assert verdicts["real"] == expected


def pending(**options: timedelta) -> PendingActivityInfo:
    """A pending activity started a moment ago, first scheduled 0.5 s before, with `options`."""
    now = datetime.now(UTC)
    info = PendingActivityInfo(activity_id="1", attempt=1)
    info.scheduled_time.FromDatetime(now - timedelta(seconds=0.5))
    info.last_started_time.FromDatetime(now)
    for name, value in options.items():
        getattr(info.activity_options, name).FromTimedelta(value)
    if "schedule_to_close_timeout" in options:
        info.expiration_time.FromDatetime(now + options["schedule_to_close_timeout"])
    return info


def test_a_held_attempt_the_server_describes_ends_as_production_ends_it() -> None:
    """The fast-forward's reading of an attempt only the server knows of (a sibling the dead
    worker held): the window, not the time left in it, decides whether a retry follows."""
    s = timedelta(seconds=1)
    window = 300 * s  # the server sets start-to-close to schedule-to-close when only that is given
    only_window = pending_end(
        pending(schedule_to_close_timeout=window, start_to_close_timeout=window)
    )
    assert (only_window.retried, only_window.shorten) == (False, "schedule-to-close")
    assert pending_end(pending(start_to_close_timeout=3 * s)).retried
    room = pending_end(pending(schedule_to_close_timeout=300 * s, heartbeat_timeout=2 * s))
    assert room.retried and room.timeout == "heartbeat"
    last = pending(start_to_close_timeout=3 * s)
    last.maximum_attempts = 1
    assert (pending_end(last).retried, pending_end(last).shorten) == (False, "start-to-close")
