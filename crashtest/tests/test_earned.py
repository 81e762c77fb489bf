"""No verdict the tool did not earn: a crash point is a verdict only where its run reaches it, in
process and on the wire alike, and a note says what happened there.

- An activity completed later by a client (`activity.raise_complete_async()`, samples-python's
  `hello_async_activity_completion`): its "after its effect" is where the worker's client sends
  the completion (in process, and on the wire as `RespondActivityTaskCompleted(ById)`), no
  longer a ✗ "never reached"; completed by another process's client, it is not tested.
- A run that goes another way from run to run never reaches a point its reference reached: no
  verdict (it was ✗, or worse, a ✓ for the activity that took the same place), not tested.
- An activity killed on its last attempt, right after its effect: nothing is made twice, and
  the note says so (it said "the retried attempt made it again").
- A failure for good is decided by the server's rule everywhere: a failure whose next attempt
  would start past the schedule-to-close deadline ends the activity, on the wire as in process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import APPS
from temporal_crashtest._wire.kill import _for_good
from temporal_crashtest._wire.tasks import SERVICE, ActivityTask
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure
from temporalio.api.workflowservice.v1 import RespondActivityTaskFailedRequest

GREETINGS = ["--workflow", "Greetings", "--input", '["ann", "bob"]',
             "--observe", "async_completion_app:greetings_of"]  # fmt: skip
IN_PROCESS = ["--worker", "async_completion_app:build"]
ON_THE_WIRE = ["--worker-cmd", f"{sys.executable} -m temporal_crashtest.worker "
               "--worker async_completion_app:build"]  # fmt: skip
# name: (arguments, more environment)
RUNS: dict[str, tuple[list[str], dict[str, str]]] = {
    "async-by-token": ([*IN_PROCESS, *GREETINGS, "--points", "after-effect"], {}),
    "async-by-id-on-the-wire": (
        [*ON_THE_WIRE, *GREETINGS, "--points", "after-effect"],
        {"ASYNC_BY": "id"},
    ),
    "async-elsewhere": (
        [*IN_PROCESS, *GREETINGS, "--points", "effect,after-effect"],
        {"ASYNC_BY": "elsewhere"},
    ),
    "another-path": (
        [
            "--worker",
            "first_run_only_app:build",
            "--workflow",
            "MaybeWelcome",
            "--input",
            '"ann"',
            "--observe",
            "first_run_only_app:observe",
            "--points",
            "after-effect",
        ],
        {},
    ),
    "last-attempt": (
        [
            "--worker",
            "last_attempt_app:build",
            "--workflow",
            "NoteOnce",
            "--input",
            '"milk"',
            "--observe",
            "last_attempt_app:notes_of",
            "--points",
            "effect",
        ],
        {},
    ),
}
Done = tuple[subprocess.CompletedProcess[str], dict[str, Any]]


@pytest.fixture(scope="module")
def runs(temporal_address: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Done]:
    """Each crash test, all at once (each is a handful of short runs)."""
    base = tmp_path_factory.mktemp("earned")
    started = {}
    for name, (args, more) in RUNS.items():
        folder = base / name
        folder.mkdir()
        env = {
            **os.environ,
            "TEMPORAL_ADDRESS": temporal_address,
            "PYTHONPATH": os.pathsep.join([str(APPS), *sys.path]),
            "NOTES_DIR": str(folder),
            **more,
        }
        report = folder / "report.json"
        command = [sys.executable, "-m", "temporal_crashtest", "run", *args, "--json", str(report)]
        started[name] = (
            subprocess.Popen(
                command,
                env=env,
                cwd=APPS,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            ),
            report,
        )
    done: dict[str, Done] = {}
    for name, (proc, report) in started.items():
        output, _ = proc.communicate(timeout=240)
        assert report.exists(), output
        done[name] = (subprocess.CompletedProcess(proc.args, proc.returncode, output, ""),
                      json.loads(report.read_text()))  # fmt: skip
    return done


def verdicts(report: dict[str, Any]) -> dict[str, bool]:
    return {c["crash_at"]: c["matches"] for c in report["cells"]}


@pytest.mark.servers
@pytest.mark.parametrize("name", ["async-by-token", "async-by-id-on-the-wire"])
def test_completed_later_its_moment_is_where_the_completion_is_sent(
    runs: dict[str, Done], name: str
) -> None:
    """Unkeyed, the greeting written before the completion is written again: ✗, not "never
    reached", whether the completion names the task's token or its ids, in process or on the
    wire."""
    done, report = runs[name]
    assert done.returncode == 1, done.stdout
    assert verdicts(report) == {"after-effect:1": False, "after-effect:2": False}, report["cells"]
    assert all("2 → 3 entries" in c["diff"] for c in report["cells"]), report["cells"]
    assert "never reached" not in done.stdout


@pytest.mark.servers
def test_completed_by_another_processs_client_is_not_tested(runs: dict[str, Done]) -> None:
    done, report = runs["async-elsewhere"]
    assert set(verdicts(report)) == {"effect:1.1", "effect:2.1"}, report["cells"]
    unreached = {u["boundary"]: u["why"] for u in report["untested"]}
    for name in ("compose_greeting#1 (ann)", "compose_greeting#2 (bob)"):
        point = f"after-effect:{name[17]} ({name})"
        assert "through a client that is not its worker's" in unreached[point], unreached
    assert "never reached" not in done.stdout


@pytest.mark.servers
def test_a_point_another_path_never_reaches_is_not_tested(runs: dict[str, Done]) -> None:
    """The reference sends a welcome; every later run does not. The welcome's point was ✗
    "never reached" — and "after-effect:2 ✓" named the welcome while it killed the greeting,
    which the crashed run had at that place."""
    done, report = runs["another-path"]
    assert done.returncode == 0, done.stdout
    assert verdicts(report) == {"after-effect:1": True}, report["cells"]
    why = {u["boundary"]: u["why"] for u in report["untested"]}
    assert why["after-effect:2 (welcome)"].startswith("not reached: "), why
    assert why["after-effect:3 (greet)"].startswith("not reached: "), why


@pytest.mark.servers
def test_a_kill_on_the_last_attempt_says_nothing_was_made_twice(runs: dict[str, Done]) -> None:
    done, report = runs["last-attempt"]
    assert done.returncode == 1, done.stdout
    assert verdicts(report) == {"effect:1.1": False}
    assert report["cells"][0]["retry"] == "not retried"
    assert "no attempt followed (its retry policy left none), so nothing was made twice" in (
        done.stdout
    )
    assert "the retried attempt made it again" not in done.stdout
    assert "send a key the receiver checks" not in done.stdout
    assert "whose worker dies on its last attempt fails in the workflow" in done.stdout


def _failed(next_retry_delay: timedelta | None = None) -> bytes:
    info = ApplicationFailureInfo(type="Declined")
    if next_retry_delay is not None:
        info.next_retry_delay.FromTimedelta(next_retry_delay)
    failure = Failure(message="declined", application_failure_info=info)
    return RespondActivityTaskFailedRequest(task_token=b"t", failure=failure).SerializeToString()


def test_a_failure_whose_retry_would_start_past_the_window_is_for_good_on_the_wire() -> None:
    """Temporal's saga sample on the wire: `addBankAccount` fails on every attempt until its
    schedule-to-close window closes. The wire took only the last of `maximum_attempts` as a
    failure for good (unlimited here: never), so its crash point was ✗ "never reached"; the
    interceptor's rule is the server's, and now the wire's too."""
    now = datetime.now(UTC)
    method = SERVICE + "RespondActivityTaskFailed"

    def task(deadline: datetime | None, backoff_s: float = 0.8) -> ActivityTask:
        return ActivityTask(
            token=b"t", workflow_id="w", run_id="r", activity_id="3",
            activity_type="add_bank_account", attempt=4, deadline=deadline,
            backoff=timedelta(seconds=backoff_s),
        )  # fmt: skip

    assert _for_good(task(now + timedelta(seconds=2.5)), method, _failed())
    assert not _for_good(task(now + timedelta(seconds=60)), method, _failed())
    assert not _for_good(task(None), method, _failed())
    # The failure's own next retry delay stands in for the policy's backoff.
    soon = task(now + timedelta(seconds=5))
    assert _for_good(soon, method, _failed(timedelta(seconds=30)))
    assert not _for_good(soon, method, _failed(timedelta(seconds=1)))
