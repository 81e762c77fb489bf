"""When a cell is run again because of load: in process (no server), the run replaced by a
script of outcomes, so each rule of `_run.cell.through_load` is seen on its own; and for real,
on a workflow whose replay load makes fail the deadlock check. The crash
tests of the suite run it for real; a deadlock on a loaded CI runner is what it was made for
(deepagents, after-checkpoint:2: six workflow tasks in a row failed the SDK's 2 s check)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from temporal_crashtest._run.cell import LOADED_RERUNS, Outcome, through_load
from temporal_crashtest._run.recovery.kills import Recovery
from temporal_crashtest._worker.task_failures import DEADLOCK

STUCK = f"the workflow task fails on the worker: {DEADLOCK} Potential deadlock detected"
HELD = "1 attempt(s) it held failed at once, to be retried"


class Script:
    """Runs that end as `outcomes` say, in turn: an error text (the run is stuck), an int (that
    many attempts no kill ended), or None (a clean run)."""

    def __init__(self, outcomes: list[str | int | None]) -> None:
        self.outcomes = outcomes
        self.shortened: list[bool] = []
        self.ids = (f"run-{n}" for n in range(1, 100))

    async def once(self, workflow_id: str, shorten: bool) -> Outcome:
        self.shortened.append(shorten)
        # As the real one does: the notes of the run's first kill's fast-forward come first.
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, str):  # the run could not be made as designed
            return Outcome(workflow_id=workflow_id, fast_forward=(HELD,), failed=outcome)
        return Outcome(
            workflow_id=workflow_id, fast_forward=(HELD,), recovery=Recovery((), outcome or 0)
        )


async def rerun(outcomes: list[str | int | None]) -> tuple[Script, Outcome]:
    script = Script(outcomes)
    return script, await through_load(script.once, script.ids)


def test_a_deadlock_on_a_loaded_machine_runs_the_cell_again() -> None:
    script, outcome = asyncio.run(rerun([STUCK, None]))
    assert script.shortened == [True, False]  # again with the production task timeout
    assert outcome.workflow_id == "run-2" and outcome.recovery.unexplained == 0
    held, note = outcome.fast_forward  # the run's own notes first, then why it was made
    assert held == HELD
    assert note.startswith("ran again (1 of at most 3)") and "deadlock check" in note


def test_attempts_no_kill_ended_run_it_again_until_clean() -> None:
    script, outcome = asyncio.run(rerun([2, 1, None]))
    assert script.shortened == [True, False, False] and outcome.workflow_id == "run-3"
    assert outcome.fast_forward[0] == HELD and "that no kill ended" in outcome.fast_forward[1]
    assert "ran again (2 of at most 3)" in outcome.fast_forward[1]


def test_any_other_failure_is_the_cells_at_once() -> None:
    script, outcome = asyncio.run(rerun(["activity charge cannot run on this worker", None]))
    assert outcome.failed == "activity charge cannot run on this worker"
    assert outcome.workflow_id == "run-1" and script.outcomes == [None]


def test_a_deadlock_that_stays_is_reported_after_the_last_rerun() -> None:
    script = Script([STUCK] * (LOADED_RERUNS + 1))
    last = asyncio.run(through_load(script.once, script.ids))
    assert len(script.shortened) == LOADED_RERUNS + 1 and not script.outcomes
    assert last.failed is not None and "Potential deadlock" in last.failed
    assert last.workflow_id == f"run-{LOADED_RERUNS + 1}"  # the last run's, saying why it was made
    assert "deadlock check" in last.fast_forward[-1]


def test_a_replay_slowed_by_load_is_run_again_grouped_or_exact(
    app_env: dict[str, str], tmp_path: Path
) -> None:
    """A cell whose new worker's replay fails the SDK's deadlock check on every attempt (the
    first four replays are slow: apps/slow_replay_app.py) is run again and passes, saying why,
    grouped or exact; it once waited out its deadline ("no result within 120 s"), a false ✗.
    Replays slow for ever end the cell with the deadlock as its cause (measured by hand)."""
    # In real time: with time skipping the server retries a failed workflow task at once, and
    # the slow replays may be spent within one run (a ✓ all the same, no rerun to see).
    args = ["--worker", "slow_replay_app:build", "--workflow", "slow_replay_app:SlowReplayWorkflow",
            "--input", '["milk", "eggs"]', "--observe", "slow_replay_app:notes_of",
            "--real-time"]  # fmt: skip
    procs = {}
    for mode, extra in {"grouped": [], "exact": ["--exact"]}.items():
        slow = tmp_path / f"{mode}.slow"
        slow.write_text("4")
        env = {**app_env, "NOTES_KEYED": "1", "SLOW_REPLAYS": str(slow)}
        command = [sys.executable, "-m", "temporal_crashtest", "run", *args, *extra,
                   "--json", str(tmp_path / f"{mode}.json")]  # fmt: skip
        procs[mode] = subprocess.Popen(command, env=env, cwd=tmp_path, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    for mode, proc in procs.items():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        cells = json.loads((tmp_path / f"{mode}.json").read_text())["cells"]
        notes = [n for c in cells for n in c["fast_forward"]]
        assert any("deadlock check (a loaded machine)" in n for n in notes), (mode, notes)
        assert (tmp_path / f"{mode}.slow").read_text() == "0"


def test_an_attempt_a_timeout_ended_on_a_live_worker_is_seen(
    app_env: dict[str, str], tmp_path: Path
) -> None:
    """The run without a crash is run again while an attempt of it still ran on its live worker
    when the server began the next (apps/overrun_app.py: a timeout ended it, and its effect
    happens beside its retry's), and says so if every run does. The history cannot tell: the
    last attempt's failure is a refusal, and a crash test compared every cell with a state that
    held a repeat already (19 of 20 cells ✗ on a loaded machine). In real time: the timeouts
    and the retry's backoff are what the app's overrun is made of."""
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "temporal_crashtest", "run", "--worker", "overrun_app:build",
               "--workflow", "overrun_app:OverrunWorkflow", "--input", '"milk"',
               "--observe", "overrun_app:notes_of", "--points", "after-checkpoint:1",
               "--json", str(report), "--real-time"]  # fmt: skip
    done = subprocess.run(command, env=app_env, cwd=tmp_path, text=True, capture_output=True)
    assert done.returncode == 0, done.stderr
    found = json.loads(report.read_text())
    assert found["reference"] == ["milk", "milk"]  # attempt 1's note, late, and attempt 3's
    (warning,) = found["warnings"]
    assert f"in each of {LOADED_RERUNS + 1} runs" in warning, warning
    assert "slow_note's attempt 1 still ran when attempt 2 began" in warning, warning
    # The cell's run overran as the reference did: by design, not load; no rerun.
    (cell,) = found["cells"]
    assert cell["matches"] and not any("ran again" in n for n in cell["fast_forward"]), cell
