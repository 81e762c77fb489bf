"""crashtest on real workflows: the grocery agent, a payments loop, and (through its pytest plugin)
a workflow written in the test itself. Workers are SIGKILLed for real by the interceptor."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from agent.steps import STEP_NAMES
from crashtest.devserver import DYNAMIC_CONFIG, PrivateDevServer, listening
from crashtest.points import CrashPoint, CrashPointError, Moment
from tests.helpers import (
    ROOT,
    assert_ends_in_error,
    assert_one_line_error,
    child_env,
    crashtest_runs,
    failing,
    run_python,
)

GROCERY = [
    "--worker", "worker:build_worker",
    "--workflow", "workflows.grocery:GroceryAgentWorkflow",
    "--input", '{"household": "household-1", "week": "2026-W49"}',
    "--observe", "agent.outcome:final_state",
    "--data-converter", "temporalio.contrib.pydantic:pydantic_data_converter",
]  # fmt: skip
PAYMENTS_INPUT = '{"customer": "acme", "invoices": ["inv-1", "inv-2", "inv-3"]}'


def payments(factory: str) -> list[str]:
    return [
        "--worker", f"examples.payments.worker:{factory}",
        "--workflow", "examples.payments.workflow:PaymentsWorkflow",
        "--input", PAYMENTS_INPUT,
        "--observe", "examples.payments.observe:payments_of",
    ]  # fmt: skip


def test_crash_points_are_parsed_and_resolved() -> None:
    names = ["look_up", "charge", "charge", "send"]
    assert CrashPoint.parse("after-effect:3") == CrashPoint(Moment.AFTER_EFFECT, position=3)
    assert str(CrashPoint.parse("after-checkpoint:charge#2")) == "after-checkpoint:charge#2"
    assert str(CrashPoint.parse("after-effect:charge#2").resolve(names)) == "after-effect:3"
    assert str(CrashPoint.parse("after-effect:send").resolve(names)) == "after-effect:4"
    # Names as agent frameworks spell them, labels with spaces, and repeats.
    point = CrashPoint.parse("after-effect:agent__mcp_server__call_tool<place_order>#2*2")
    assert (point.activity, point.occurrence, point.repeat) == (
        "agent__mcp_server__call_tool<place_order>", 2, 2)  # fmt: skip
    assert CrashPoint.parse("after-checkpoint:run 2: notify").text == "run 2: notify"
    with pytest.raises(CrashPointError, match=r"\*K crashes 1 to 5 times"):
        CrashPoint.parse("after-effect:1*9")
    for text, message in [
        ("after-lunch:1", "expected after-effect:N, after-checkpoint:N or reset:N"),
        ("reset:2", "reset:2 is for `python -m crashtest run --points`"),
        ("after-effect:2*2", "after-effect:2*2 is for `python -m crashtest run --points`"),
        ("after-effect:0", "positions start at 1"),
        ("after-effect:charge#3", "'charge' runs 2 time(s)"),
        ("after-effect:refund", "'refund' is not an activity"),
        ("after-checkpoint:4", "after-checkpoint:4 has no next activity to crash in; use 1..3"),
        ("after-effect:5", "valid: after-effect:1..4, after-checkpoint:1..3"),
    ]:
        with pytest.raises(CrashPointError, match=re.escape(message)):
            CrashPoint.parse(text).resolve(names)


def test_grocery_agent_with_and_without_keys(
    db_url: str, temporal_address: str, tmp_path: Path
) -> None:
    env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address)
    results = crashtest_runs(
        {"keys": (GROCERY, {}), "none": (GROCERY, {"KEY_STRATEGY": "none"})}, env, tmp_path
    )
    done, report = results["keys"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["workflow"] == "GroceryAgentWorkflow"
    assert report["activities"] == list(STEP_NAMES)
    cells = report["cells"]
    assert [c["crash_at"] for c in cells] == [
        *(f"after-effect:{n}" for n in range(1, 7)),
        *(f"after-checkpoint:{n}" for n in range(1, 6)),
    ]
    assert all(c["observed"] == report["reference"] for c in cells)
    # After an effect, a SIGKILLed worker is noticed through its activity's heartbeat timeout,
    # then the run's workflow task leaves the dead worker's sticky queue; after a checkpoint the
    # worker died holding the workflow task, which times out.
    for c in cells:
        first = c["waited_on"][0]
        if c["crash_at"].startswith("after-effect"):
            assert c["recovery_s"] > 2 and "heartbeat timeout 2.0 s" in first, c
        else:
            assert c["recovery_s"] > 5 and first == "workflow task start-to-close timeout 10.0 s"
    assert "all 11 crash points end in the no-crash state" in done.stdout

    done, report = results["none"]
    assert done.returncode == 1, done.stdout + done.stderr
    # Without keys: a second model call at 1, 3, 6, a second order at 4, a second email at 5.
    assert failing(report) == {f"after-effect:{n}" for n in (1, 3, 4, 5, 6)}
    by_point = {c["crash_at"]: c for c in report["cells"]}
    assert by_point["after-effect:4"]["diff"] == "orders: 1 → 2 entries"
    assert by_point["after-effect:5"]["diff"] == "emails: 1 → 2 entries"
    assert "after-effect:4 (place_order), after-effect:5 (send_confirmation)" in done.stdout


def test_payments_unkeyed_charges_are_caught_at_exactly_the_charges(
    db_url: str, temporal_address: str, tmp_path: Path
) -> None:
    """...and a second crash during recovery (`*2`) at a charge: the keyed charge still happens
    once; the unkeyed one three times."""
    env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address)
    twice = ["--points", "after-effect:charge#2*2"]
    results = crashtest_runs(
        {
            "keyed": (payments("keyed_worker"), {}),
            "unkeyed": (payments("unkeyed_worker"), {}),
            "keyed-twice": ([*payments("keyed_worker"), *twice], {}),
            "unkeyed-twice": ([*payments("unkeyed_worker"), *twice], {}),
        },
        env,
        tmp_path,
    )
    done, report = results["keyed"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["activities"] == ["look_up_invoices", "charge#1 (acme inv-1)",
                                    "charge#2 (acme inv-2)", "charge#3 (acme inv-3)",
                                    "send_receipt"]  # fmt: skip
    assert not failing(report) and report["untested"] == []

    done, report = results["unkeyed"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert failing(report) == {"after-effect:2", "after-effect:3", "after-effect:4"}
    diffs = {c["diff"] for c in report["cells"] if not c["matches"]}
    assert diffs == {"charges: 3 → 4 entries"}

    for name, code, diff in [("keyed-twice", 0, None), ("unkeyed-twice", 1,
                                                         "charges: 3 → 5 entries")]:  # fmt: skip
        done, report = results[name]
        assert done.returncode == code, done.stdout + done.stderr
        [cell] = report["cells"]
        assert (cell["crash_at"], cell["crashes"], cell["diff"]) == ("after-effect:3*2", 2, diff)
        # Only the boundary asked for was crashed: the others are listed as not tested.
        assert [u["boundary"] for u in report["untested"]] == [
            b for b in report["activities"] if b != "charge#2 (acme inv-2)"
        ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--worker": "nosuch.module:build"}, "cannot import 'nosuch.module'"),
        ({"--worker": "worker:no_such_factory"}, "'worker' has no 'no_such_factory'"),
        ({"--input": "{household"}, "--input is not JSON"),
        ({"--workflow": "worker:build_worker"}, "is not a @workflow.defn class"),
        ({"--observe": "agent.outcome"}, "expected MODULE:NAME"),
        ({"--points": "after-lunch:1"}, "unknown crash point 'after-lunch:1'"),
    ],
)
def test_bad_input_is_one_line(
    change: dict[str, str], message: str, db_url: str, temporal_address: str
) -> None:
    args = list(GROCERY)
    for flag, value in change.items():
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    done = run_python(
        ["-m", "crashtest", "run", *args], child_env(db_url, TEMPORAL_ADDRESS=temporal_address)
    )
    assert_one_line_error(done, message, prefix="crashtest: error: ")


def test_a_point_that_names_no_boundary_and_a_broken_factory_are_one_line(
    db_url: str, temporal_address: str, tmp_path: Path
) -> None:
    env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address)
    done = run_python(["-m", "crashtest", "run", *payments("keyed_worker"),
                       "--points", "after-effect:refund"], env)  # fmt: skip
    assert_ends_in_error(done, "no boundary is named 'refund'; its activities: look_up_invoices, "
                         "charge, send_receipt", "crashtest: error: ")  # fmt: skip

    (tmp_path / "wrong_queue.py").write_text(
        "from temporalio.worker import Worker\n"
        "from examples.payments.workflow import PaymentsWorkflow\n"
        "def build(client, task_queue):\n"
        "    return Worker(client, task_queue='elsewhere', workflows=[PaymentsWorkflow])\n"
    )
    args = payments("keyed_worker")
    args[1] = "wrong_queue:build"
    env["PYTHONPATH"] = str(tmp_path)
    done = run_python(["-m", "crashtest", "run", *args], env, timeout=60)
    assert_ends_in_error(done, "it must use the task_queue it is given", "crashtest: error: ")


REPLAYS_DIFFERENTLY = '''
"""A workflow that schedules `step` when it first runs and `other` when replayed by another
process (a module passed through the sandbox remembers, in a file, that it ran)."""
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    import first_time


@activity.defn
async def step() -> None: ...


@activity.defn
async def other() -> None: ...


@workflow.defn
class ReplaysDifferently:
    @workflow.run
    async def run(self, folder: str) -> None:
        first = first_time.first_time(Path(folder) / workflow.info().workflow_id)
        await workflow.execute_activity(step if first else other, heartbeat_timeout=timedelta(
            seconds=2), start_to_close_timeout=timedelta(seconds=10))


def build(client, task_queue):
    return Worker(client, task_queue=task_queue, workflows=[ReplaysDifferently],
                  activities=[step, other],
                  sticky_queue_schedule_to_start_timeout=timedelta(seconds=1))


def build_without_it(client, task_queue):
    return Worker(client, task_queue=task_queue, workflows=[], activities=[step])


def observe(workflow_id):
    return None
'''
FIRST_TIME = """
def first_time(marker):
    if marker.exists():
        return False
    marker.touch()
    return True
"""


def test_a_stuck_workflow_task_ends_the_cell_at_once(
    db_url: str, temporal_address: str, tmp_path: Path
) -> None:
    """Temporal waits for a worker, or retries a failing workflow task, forever; crashtest says
    why in seconds instead of waiting out its deadline."""
    (tmp_path / "replays.py").write_text(REPLAYS_DIFFERENTLY)
    (tmp_path / "first_time.py").write_text(FIRST_TIME)
    env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address, PYTHONPATH=str(tmp_path))
    args = ["--workflow", "replays:ReplaysDifferently", "--input", json.dumps(str(tmp_path)),
            "--observe", "replays:observe"]  # fmt: skip

    # A worker with no workflows never polls for them: the reference run cannot start.
    done = run_python(["-m", "crashtest", "run", "--worker", "replays:build_without_it", *args],
                      env, timeout=60)  # fmt: skip
    assert_ends_in_error(done, "does the factory's Worker register the workflow ReplaysDifferently",
                         "crashtest: error: ")  # fmt: skip

    # Code that replays differently after the crash: the fresh worker's replay fails.
    done = run_python(["-m", "crashtest", "run", "--worker", "replays:build", *args,
                       "--points", "after-effect:1"], env, timeout=60)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Nondeterminism error" in done.stdout


def test_crashtest_depends_on_temporalio_and_the_standard_library_only() -> None:
    allowed = {*sys.stdlib_module_names, "temporalio", "crashtest", "pytest"}
    for path in (ROOT / "crashtest").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            assert {n.split(".")[0] for n in names} <= allowed, (path, names)


def test_a_private_dev_server_is_tuned_and_stopped(tmp_path: Path) -> None:
    server = PrivateDevServer(tmp_path / "server.log")
    try:
        host, port = server.start().split(":")
        assert listening(host, int(port))
        assert server.proc is not None
        args = " ".join(map(str, server.proc.args))  # type: ignore[arg-type]
        assert all(f"{key}={value}" in args for key, value in DYNAMIC_CONFIG.items())
    finally:
        server.stop()
    assert not listening(host, int(port))


def test_nothing_in_the_product_knows_about_crashes() -> None:
    for folder in ("workflows", "activities", "agent"):
        for path in (ROOT / folder).rglob("*.py"):
            assert "crash" not in path.read_text().lower(), path


NOTES_APP = '''
"""A tiny app written for this test: each activity appends a line to a file (an effect outside
any database); with NOTES_KEYED=1 it first looks for its key there."""
import os
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.worker import Worker


def notes_file(workflow_id):
    return Path(os.environ["NOTES_DIR"]) / f"{workflow_id}.txt"


@activity.defn
async def write_note(text: str) -> None:
    info = activity.info()
    path, key = notes_file(info.workflow_id), f"{info.workflow_id}:{info.activity_id}"
    if os.environ.get("NOTES_KEYED") and path.exists() and key in path.read_text():
        return
    with path.open("a") as notes:
        notes.write(f"{key} {text}\\n")


@workflow.defn
class NotesWorkflow:
    @workflow.run
    async def run(self, texts: list[str]) -> int:
        for text in texts:
            await workflow.execute_activity(
                write_note, text, start_to_close_timeout=timedelta(seconds=30),
                heartbeat_timeout=timedelta(seconds=2),
            )
        return len(texts)


def build(client, task_queue):
    return Worker(client, task_queue=task_queue, workflows=[NotesWorkflow], activities=[write_note],
                  sticky_queue_schedule_to_start_timeout=timedelta(seconds=1))


def notes_of(workflow_id):
    path = notes_file(workflow_id)
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.split(" ", 1)[1] for line in lines]
'''

NOTES_TESTS = """
import pytest

from notes_app import NotesWorkflow, build, notes_of


def test_keyed_notes(crash_test):
    report = crash_test(worker=build, workflow=NotesWorkflow, input=["milk", "eggs"],
                        observe=notes_of, env={"NOTES_KEYED": "1"})
    assert [c.crash_at for c in report.cells] == ["after-effect:1", "after-effect:2",
                                                  "after-checkpoint:1"]


@pytest.mark.crashtest(jobs=2)
def test_unkeyed_notes(crash_test):
    crash_test(worker=build, workflow=NotesWorkflow, input=["milk", "eggs"], observe=notes_of)


def test_reference_checked_against_what_is_expected(crash_test):
    report = crash_test(worker=build, workflow=NotesWorkflow, input=["milk", "eggs"],
                        observe=notes_of, expect=["milk"], expect_all_match=False)
    assert report.cells == [] and report.expect_diff == "the observed value: 1 → 2 entries"
"""


PLAIN_TEST = """
import sys


def test_nothing_of_temporal_is_loaded(request):
    assert request.config.pluginmanager.has_plugin("crashtest")
    assert not [name for name in sys.modules if name.startswith("temporalio")]
"""


def test_pytest_plugin(
    pytester: pytest.Pytester, temporal_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_address)
    monkeypatch.setenv("NOTES_DIR", str(pytester.path))
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(notes_app=NOTES_APP, test_notes=NOTES_TESTS, test_plain=PLAIN_TEST)
    # Installed, the plugin is inert: a session that does not use it loads no Temporal code.
    pytester.runpytest_subprocess("test_plain.py").assert_outcomes(passed=1)

    result = pytester.runpytest_subprocess("test_notes.py", timeout=240)
    result.assert_outcomes(passed=2, failed=1)
    # The failure names the boundaries that wrote a note twice, and says what differs.
    result.stdout.fnmatch_lines([
        "*NotesWorkflow: 2 of 3 crash points do not end in the no-crash state*",
        "*after-effect:1 (write_note#1 (milk)): the observed value: 2 → 3 entries*",
        "*after-effect:2 (write_note#2 (eggs)): the observed value: 2 → 3 entries*",
    ])  # fmt: skip
    assert "Traceback" not in result.stdout.str()
