"""`run --worker-cmd`: a worker of any SDK, given as a command, crash-tested through the proxy on
the wire — the same notes workflow written in TypeScript (examples/typescript) and in Python
(apps/command_worker.py), and the Python one built in process by crashtest as any factory is:
the three give the same verdicts at every point unkeyed (the note written twice after its
effect), and keyed none fails after an effect. A deploy between two TypeScript versions
(`--deploy-cmd`): unpatched, every run in flight is stuck on the new version; patched, none. A
workflow whose notes are written in a child workflow and in the run it continues as: each
killed there, in TypeScript as in Python. And what a worker command cannot be given is one line
before anything starts."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import APPS, MODULE_BUDGET_S
from test_wire import COMMANDS, command_for

# Two cells at a time, four crash tests at a time: each cell starts two worker commands afresh
# (~0.5 s of CPU each), and all of them at once (eight tests of up to 16 cells) starved the
# rest of the suite beside two busy loops (two other tests' workers outran their deadlines).
NOTES = ["--workflow", "TwoNotes", "--input", '["milk", "eggs"]',
         "--observe", "notes_app:notes_of", "--jobs", "2"]  # fmt: skip
AT_ONCE = 4
# The module's crash tests run once, in the first test's setup.
pytestmark = pytest.mark.timeout(MODULE_BUDGET_S)
NEEDS_NODE = ("typescript", "deploy-", "tree-typescript", "asleep-")  # the kinds run with node
POINTS = ["--points", "after-effect,after-checkpoint,in-task"]
# Keyed, only the points after each note's effect: the unkeyed run of the same worker passes at
# every other point (no effect repeats there, key or none), so a keyed run there proves nothing
# more (3 cells of 5, two worker commands started for each, per keyed run).
KEYED_POINTS = ["--points", "after-effect"]
WORKERS = {
    "typescript": None,  # the command, test_wire's (skipped where node is missing)
    "python-command": None,
    "python-in-process": ["--worker", "command_worker:build"],
}
EVERY = {"after-effect:1", "after-effect:2", "after-checkpoint:1", "in-task:1", "in-task:2"}
AFTER_EFFECTS = {"after-effect:1", "after-effect:2"}
# NotesInATree: the first note from a child, the second from the run it continues as.
TREE = ["--workflow", "NotesInATree", "--input", '["milk", "eggs"]',
        "--observe", "notes_app:notes_of", "--jobs", "2"]  # fmt: skip
TREE_WORKERS = {"tree-typescript": None, "tree-python-in-process": WORKERS["python-in-process"]}
UNKEYED_FAILS = {"after-effect:1", "after-effect:2"}  # the note written again
DEPLOYED = ("v2", "v2-patched")  # examples/typescript/src/deploys
# NoteAfterADay (Temporal's patching-api sample's shape: a note, a day's sleep, a note),
# deployed to the same versions: before the sleep, while it sleeps (no real time: skipped).
ASLEEP = ["--workflow", "NoteAfterADay", "--input", '["milk", "eggs"]',
          "--observe", "notes_app:notes_of", "--jobs", "2",
          "--points", "after-effect:1,after-checkpoint:1,in-task:1,wait:2"]  # fmt: skip


def _args(kind: str, keyed: bool) -> list[str]:
    """The crash test's arguments for one kind of worker, or one deploy (`deploy-VERSION`: the
    TypeScript notes from version 1 to VERSION, examples/typescript/src/deploys)."""
    node = " ".join(COMMANDS["typescript"])
    if kind.startswith(("deploy-", "asleep-")):
        version = kind.split("-", 1)[1]
        workflow = ASLEEP if kind.startswith("asleep-") else NOTES
        return ["--worker-cmd", node, "--deploy-cmd", f"{node} {version}", *workflow]
    points = KEYED_POINTS if keyed else POINTS
    if kind in TREE_WORKERS:
        return [*(TREE_WORKERS[kind] or ["--worker-cmd", node]), *TREE, *points]
    given = WORKERS[kind]
    if given is None:
        given = ["--worker-cmd", node if kind == "typescript" else " ".join(COMMANDS["python"])]
    return [*given, *NOTES, *points]


def _notes_run(
    kind: str, keyed: bool, address: str, out: Path
) -> tuple[subprocess.Popen[str], Path]:
    notes = out / f"{kind}-{keyed}"
    notes.mkdir()
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "PYTHONPATH": os.pathsep.join([str(APPS), *sys.path]),
        "NOTES_DIR": str(notes),
    }
    env |= {"NOTES_KEYED": "1"} if keyed else {}
    report = notes / "report.json"
    args = [*_args(kind, keyed), "--json", str(report)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "temporal_crashtest", "run", *args],
        env=env,
        cwd=APPS,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, report


@pytest.fixture(scope="module")
def verdicts(
    temporal_address: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, bool], tuple[int, dict[str, Any]]]:
    """Each worker's crash test, unkeyed and keyed, and the deploys (keyed), AT_ONCE at a time,
    the next as one ends: (exit code, JSON report). Where node is missing, the TypeScript ones
    are not run (their tests skip)."""
    out = tmp_path_factory.mktemp("worker-command")
    node = shutil.which("node") is not None
    every = [(kind, keyed) for kind in WORKERS for keyed in (False, True)]
    every += [(f"{how}-{version}", True) for how in ("deploy", "asleep") for version in DEPLOYED]
    every += [("tree-typescript", False), ("tree-typescript", True)]
    every += [("tree-python-in-process", False)]
    every = [(k, keyed) for k, keyed in every if node or not k.startswith(NEEDS_NODE)]

    def verdict(kind: str, keyed: bool) -> tuple[int, dict[str, Any]]:
        proc, report = _notes_run(kind, keyed, temporal_address, out)
        try:
            output, _ = proc.communicate(timeout=MODULE_BUDGET_S)
        finally:
            proc.kill()  # ended already, but for a crash test past the budget
        assert report.exists(), output
        return proc.returncode, json.loads(report.read_text())

    with concurrent.futures.ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        return dict(zip(every, pool.map(lambda run: verdict(*run), every), strict=True))


def failing(report: dict[str, Any]) -> set[str]:
    return {c["crash_at"] for c in report["cells"] if not c["matches"]}


@pytest.mark.servers
@pytest.mark.parametrize("kind", WORKERS)
@pytest.mark.parametrize("keyed", [False, True])
def test_a_worker_command_gets_the_in_process_verdicts(
    verdicts: dict[tuple[str, bool], tuple[int, dict[str, Any]]], kind: str, keyed: bool
) -> None:
    """Every point is made on the wire as in process; unkeyed, exactly the points after each
    note's effect fail (the note written twice), in every language; keyed, none of them."""
    if kind == "typescript":
        command_for("typescript")  # skips where node is missing
    code, report = verdicts[(kind, keyed)]
    assert {c["crash_at"] for c in report["cells"]} == (AFTER_EFFECTS if keyed else EVERY)
    assert failing(report) == (set() if keyed else UNKEYED_FAILS), report["cells"]
    assert code == (0 if keyed else 1)
    assert report["reference"] == ["milk", "eggs"]
    unkeyed = next(c for c in report["cells"] if c["crash_at"] == "after-effect:1")
    if not keyed:
        assert "2 → 3" in unkeyed["diff"], unkeyed


@pytest.mark.servers
@pytest.mark.parametrize(("version", "fails"), list(zip(DEPLOYED, (True, False), strict=True)))
def test_a_deploy_of_worker_commands(
    verdicts: dict[tuple[str, bool], tuple[int, dict[str, Any]]], version: str, fails: bool
) -> None:
    """Version 2 starts a timer before the first note: unpatched, a run taken over after a kill
    replays version 1's history on it and its workflow task fails (nondeterminism) at every
    point; behind `patched`, every point ends in a version's no-crash state."""
    command_for("typescript")  # skips where node is missing
    code, report = verdicts[(f"deploy-{version}", True)]
    assert report["deploy_to"].endswith(f"worker.js {version}")
    assert {c["crash_at"] for c in report["cells"]} == {
        "after-effect:1",
        "after-effect:2",
        "after-checkpoint:1",
    }
    if fails:
        assert code == 1 and all(not c["matches"] for c in report["cells"])
        assert all("Nondeterminism" in c["diff"] for c in report["cells"]), report["cells"]
    else:
        assert code == 0 and failing(report) == set(), report["cells"]


@pytest.mark.servers
def test_a_deploy_of_worker_commands_while_a_run_sleeps(
    verdicts: dict[tuple[str, bool], tuple[int, dict[str, Any]]],
) -> None:
    """A note, a day's sleep, a note, in TypeScript, deployed to a version whose first note is
    another activity: unpatched, a run that scheduled version 1's replays into it — killed
    after its first note or while asleep (the worker killed on the wire, the timer then
    skipped), its workflow task fails (nondeterminism); killed in its first task, version 2
    takes its own path. Behind `patched`, every point ends in a version's no-crash state."""
    command_for("typescript")  # skips where node is missing
    code, report = verdicts[("asleep-v2", True)]
    by_point = {c["crash_at"]: c for c in report["cells"]}
    assert code == 1 and failing(report) == {"after-effect:1", "after-checkpoint:1", "wait:2"}
    for point in failing(report):
        assert _stuck_on_v2(by_point[point]["diff"]), (point, by_point[point])
    assert by_point["wait:2"]["activity"] == "writeNote#2 (eggs), after a timer of 24 hours"
    assert by_point["in-task:1"]["observed"] == ["MILK", "eggs"], by_point["in-task:1"]
    code, report = verdicts[("asleep-v2-patched", True)]
    assert code == 0 and failing(report) == set(), report["cells"]
    assert len(report["cells"]) == 4, report["cells"]


def _stuck_on_v2(diff: str) -> bool:
    """The run is stuck on version 2: its workflow task failed with the nondeterminism error,
    or — where version 2's worker first took the task on a retry (seen once, after-checkpoint:1
    in a quiet suite; not again in 16 crash tests of that point alone) — retried at its deadline:
    the TypeScript SDK does not report a retried task's failure (docs/time.md), so nothing
    names the error."""
    return "[TMPRL1100] Nondeterminism error" in diff or bool(
        re.search(
            r"^no result within [\d.]+ s; the run is running; its workflow task, attempt (?!1,)\d+",
            diff,
        )
    )


@pytest.mark.servers
@pytest.mark.parametrize("keyed", [False, True])
def test_a_worker_command_killed_in_a_child_and_a_later_run(
    verdicts: dict[tuple[str, bool], tuple[int, dict[str, Any]]], keyed: bool
) -> None:
    """Each activity of a child workflow and of the run a chain continued as is a crash point
    on the wire, found in the run at its place in the tree and named as a Python worker names
    it: unkeyed, the points after each note's effect fail, as in process; keyed, neither."""
    command_for("typescript")  # skips where node is missing
    code, report = verdicts[("tree-typescript", keyed)]
    assert report["activities"] == ["run 1: OneNote/writeNoteIn", "run 2: writeNoteIn"]
    assert {c["crash_at"] for c in report["cells"]} == (AFTER_EFFECTS if keyed else EVERY)
    if not keyed:  # every point asked for: none left but the one after which the run only ends
        only_ends = "after-checkpoint:2 (run 2: writeNoteIn)"  # and inside the activities
        assert [u["boundary"] for u in report["untested"]] == [
            only_ends,
            "effect:N.K (inside every activity)",
        ]
    assert failing(report) == (set() if keyed else UNKEYED_FAILS), report["cells"]
    assert code == (0 if keyed else 1)
    assert report["reference"] == ["milk", "eggs"]
    # The attempt a kill dies reporting is the kill's, not one more the worker held.
    assert all(c["in_flight"] == [] for c in report["cells"]), report["cells"]
    if not keyed:
        _, in_process = verdicts[("tree-python-in-process", False)]
        assert {c["crash_at"] for c in in_process["cells"]} == EVERY
        assert failing(in_process) == failing(report)


@pytest.mark.servers
def test_crashtests_own_python_worker_as_a_command_is_forked(
    temporal_address: str, tmp_path: Path
) -> None:
    """`python -m temporal_crashtest.worker --worker F` as the worker command, in the crash
    test's own interpreter: forked, built, from a fork server (as fast as in process) and killed
    on the wire, with the in-process verdict."""
    notes = tmp_path / "notes"
    notes.mkdir()
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_address, "NOTES_DIR": str(notes)}
    env["PYTHONPATH"] = os.pathsep.join([str(APPS), *sys.path])
    command = f"{sys.executable} -m temporal_crashtest.worker --worker command_worker:build"
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "temporal_crashtest", "run", "--worker-cmd", command, *NOTES,
         "--points", "after-effect:1", "--json", str(report)],
        env=env, cwd=APPS, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "each worker is forked from a fork server, built, and killed on the wire" in done.stderr
    assert failing(json.loads(report.read_text())) == {"after-effect:1"}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([*NOTES], "give the worker: --worker MODULE:FACTORY or --worker-cmd COMMAND"),
        (
            ["--worker", "command_worker:build", "--worker-cmd", "node w.js", *NOTES],
            "give the worker: --worker MODULE:FACTORY or --worker-cmd COMMAND",
        ),
        (["--worker-cmd", "no-such-program-4242 w.js", *NOTES], "no such program"),
        (["--worker-cmd", "'unclosed", *NOTES], "--worker-cmd"),
        (
            ["--worker-cmd", f"{sys.executable} w.py", "--http", "127.0.0.1:1", *NOTES],
            "the http observer watches from inside a Python worker",
        ),
        (
            ["--worker-cmd", f"{sys.executable} w.py", "--deploy-to", "x:y", *NOTES],
            "a deploy between a worker command and a Python factory",
        ),
        (
            ["--worker-cmd", f"{sys.executable} w.py", "--deploy-cmd", "no-such-4242", *NOTES],
            "--deploy-cmd no-such-4242: no such program",
        ),
    ],
)
def test_what_a_worker_command_cannot_be_given(tmp_path: Path, args: list[str], says: str) -> None:
    """One line, exit 2, before any server or process is started."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(APPS), *sys.path])}
    env.pop("TEMPORAL_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-m", "temporal_crashtest", "run", *args, "--address", "127.0.0.1:1"],
        env=env,
        cwd=APPS,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr


def _left_behind(notes: Path) -> list[int]:
    """The processes still running with this test's NOTES_DIR in their environment."""
    mark = f"NOTES_DIR={notes}".encode()
    left = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if mark in (entry / "environ").read_bytes().split(b"\0"):
                    left.append(int(entry.name))
    return left


@pytest.mark.servers
def test_what_a_worker_command_started_dies_with_it(temporal_address: str, tmp_path: Path) -> None:
    """The probe: a command that starts its worker with `&` and `wait` (no exec), and a worker
    that forks a daemon into a session of its own, left processes polling (or sleeping) after
    the crash test ended, unsaid. Every process the command started carries crashtest's token:
    each is killed with it, and the report says once what had left its group."""
    if not Path("/proc/self/environ").exists():
        pytest.skip("no /proc: a process's environment cannot be read here")
    notes = tmp_path / "notes"
    notes.mkdir()
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_address, "NOTES_DIR": str(notes),
           "ESCAPE": "1", "PYTHONPATH": os.pathsep.join([str(APPS), *sys.path])}  # fmt: skip
    command = f"sh -c '{sys.executable} {APPS / 'escaping_worker.py'} & wait'"
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "temporal_crashtest", "run", "--worker-cmd", command, *NOTES,
         "--points", "after-effect:1", "--json", str(report)],
        env=env, cwd=APPS, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert failing(json.loads(report.read_text())) == {"after-effect:1"}
    assert _left_behind(notes) == []
    said = [w for w in json.loads(report.read_text())["warnings"] if "left its process group" in w]
    # Two or more: a daemon per worker started, the reference's and the cell's (a loaded
    # machine's reruns start more).
    assert len(said) == 1 and int(said[0].split(" ")[0]) >= 2, said
