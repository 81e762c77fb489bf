"""`python -m temporal_crashtest run` and its pytest plugin on apps that know nothing of any
project: a notes app whose effect is a line in a file, and a workflow that replays differently.
Workers are SIGKILLed for real."""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import APPS
from temporal_crashtest._errors import InputError
from temporal_crashtest._run.devserver import DYNAMIC_CONFIG, PrivateDevServer, listening

SRC = Path(__file__).resolve().parent.parent / "src" / "temporal_crashtest"
NOTES = ["--worker", "notes_app:build", "--workflow", "notes_app:NotesWorkflow",
         "--input", '["milk", "eggs"]', "--observe", "notes_app:notes_of"]  # fmt: skip


def crashtest(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "temporal_crashtest", "run", *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    return done.stderr.strip().splitlines()[-1]


def test_fast_forwarded_and_real_timeouts_agree_and_threads_forbid_forking(
    app_env: dict[str, str], tmp_path: Path
) -> None:
    """The unkeyed notes fail at both notes, fast-forwarded or waiting out the server's timeouts,
    which wait on what the fast report says production waits on. A module that starts a thread
    at import cannot be forked: every worker then starts afresh, with the same verdicts."""
    threaded = [a.replace("notes_app:", "threaded_app:") for a in NOTES]
    (tmp_path / "input.json").write_text(NOTES[NOTES.index("--input") + 1])
    from_file = ["@input.json" if a == NOTES[NOTES.index("--input") + 1] else a for a in NOTES]
    runs = {"fast": NOTES, "real": [*from_file, "--real-timeouts"], "threaded": threaded}
    procs = {}
    for name, args in runs.items():
        command = [sys.executable, "-m", "temporal_crashtest", "run", *args,
                   "--json", str(tmp_path / f"{name}.json")]  # fmt: skip
        procs[name] = subprocess.Popen(
            command, env=app_env, cwd=tmp_path, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
    reports, errors = {}, {}
    for name, proc in procs.items():
        _, errors[name] = proc.communicate(timeout=180)
        assert proc.returncode == 1, errors[name]
        reports[name] = json.loads((tmp_path / f"{name}.json").read_text())
    verdicts = {
        name: [(c["crash_at"], c["matches"], c["diff"]) for c in report["cells"]]
        for name, report in reports.items()
    }
    assert verdicts["fast"] == verdicts["real"] == verdicts["threaded"]
    assert {point for point, ok, _ in verdicts["fast"] if not ok} == {
        "after-effect:1",
        "after-effect:2",
    }
    for fast, real in zip(reports["fast"]["cells"], reports["real"]["cells"], strict=True):
        assert fast["fast_forward"] and not real["fast_forward"]
        own = f"{fast['activity']} heartbeat timeout 2.0 s"
        if fast["crash_at"].startswith("after-checkpoint"):
            own = "workflow task start-to-close timeout 10.0 s"
        assert own in fast["waited_on"] and own in real["waited_on"], (fast, real)
    assert "every worker starts afresh" not in errors["fast"]
    # which process, which thread, what to do
    said = next(line for line in errors["threaded"].splitlines() if "none can be forked" in line)
    assert "in this command, 2 threads run after the imports" in said, said
    assert "in a fork server started afresh, 2 threads" in said, said
    assert "Python thread 'started-at-import'" in said and "in the worker factory" in said, said


def test_bad_input_is_one_line(app_env: dict[str, str], tmp_path: Path) -> None:
    """(The notes app's crash test itself runs in the plugin and install tests.)"""
    for change, message in [
        (["--points", "after-lunch:1"], "unknown crash point 'after-lunch:1'"),
        (["--input", "{milk"], "--input is not JSON"),
        (["--input", "@nowhere.json"], "--input @nowhere.json: cannot read it"),
        (["--input", "@/dev/zero"], "--input @/dev/zero is not a regular file"),  # not read to OOM
        (["--input", "Infinity"], "Infinity is not a number JSON holds"),
        (["--points", "after-effect:²"], "no boundary is named '²'"),
        (["--expect", "@nowhere.json"], "--expect @nowhere.json: cannot read it"),
        (["--drive", "notes_app:nothing"], "'notes_app' has no 'nothing'"),
        (["--expect-version", "new"], "expecting the new version's state is for a deploy test"),
        (["--deploy-tree", "base"], "a source tree for the deployed version, and no"),
        (["--worker-tree", "nowhere"], "--worker-tree "),
        # A module that ends the process when imported: one line, exit 2 (os._exit was a
        # silent exit 0: "every cell matches" to CI).
        (["--worker", "exiting_app:build"], "'exiting_app' exited when imported (sys.exit(3))"),
        (["--worker", "exiting_app:build", "EXIT_HOW=os"], "imported, called os._exit(0)"),
    ]:
        args = list(NOTES)
        env = app_env
        if change[-1].startswith("EXIT_HOW="):
            env = {**app_env, "EXIT_HOW": change.pop().partition("=")[2]}
        if change[0] in args:
            args[args.index(change[0]) + 1] = change[1]
        else:
            args += change
        done = crashtest(args, env, tmp_path, timeout=60)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert last_line(done).startswith("crashtest: error: ") and message in last_line(done)

    # A worker crashed by hand: a bad point is one line; a good one names the boundary it hit.
    worker = [sys.executable, "-m", "temporal_crashtest.worker", "--worker", "notes_app:build",
              "--task-queue", "by-hand"]  # fmt: skip
    done = subprocess.run([*worker, "--crash-at", "reset:1"], env=app_env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "one worker crashes itself once" in last_line(done)


def test_a_stuck_workflow_task_ends_the_cell_at_once(
    app_env: dict[str, str], tmp_path: Path
) -> None:
    """Temporal waits for a worker, or retries a failing workflow task, forever; crashtest says
    why at once instead of waiting out its deadline."""
    args = ["--workflow", "replays:ReplaysDifferently", "--input", json.dumps(str(tmp_path)),
            "--observe", "replays:observe"]  # fmt: skip
    # A worker with no workflows would never poll for them: said before the reference run.
    done = crashtest(["--worker", "replays:build_without_it", *args], app_env, tmp_path, 60)
    assert done.returncode == 2, done.stderr
    assert "that registers no workflow: the workflow under test starts there" in last_line(done)
    # A child on a task queue the worker does not poll, nor any other: said at once.
    unserved = ["--worker", "unserved_child:build", "--workflow",
                "unserved_child:StartsAnUnservedChild", "--input", '""',
                "--observe", "unserved_child:observe"]  # fmt: skip
    done = crashtest(unserved, app_env, tmp_path, 90)
    assert done.returncode == 2, done.stderr
    line = last_line(done)
    assert "no worker takes workflow tasks from task queue crashtest-" in line, line
    assert "-nobody: does the factory's Worker register the workflow Child?" in line, line

    # Code that replays differently after the crash: the fresh worker's replay fails.
    done = crashtest(["--worker", "replays:build", *args, "--points", "after-effect:1"],
                     app_env, tmp_path, 60)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Nondeterminism error" in done.stdout


def test_pytest_plugin(pytester: pytest.Pytester, app_env: dict[str, str],
                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    for name in ("TEMPORAL_ADDRESS", "NOTES_DIR"):
        monkeypatch.setenv(name, app_env[name])
    monkeypatch.setenv("NOTES_DIR", str(pytester.path))
    shutil.copy(APPS / "notes_app.py", pytester.path)
    shutil.copy(APPS / "pytester_notes.py", pytester.path / "test_notes.py")
    shutil.copy(APPS / "pytester_plain.py", pytester.path / "test_plain.py")
    pytester.makeini("[pytest]\n")
    # Installed, the plugin is inert: a session that does not use it loads no Temporal code.
    pytester.runpytest_subprocess("-p", "no:asyncio", "test_plain.py").assert_outcomes(passed=1)

    result = pytester.runpytest_subprocess("-p", "no:asyncio", "test_notes.py", timeout=240)
    result.assert_outcomes(passed=2, failed=1)
    # The failure names the boundaries that wrote a note twice, and says what differs.
    result.stdout.fnmatch_lines([
        "*NotesWorkflow: 2 of 3 crash points do not end in the no-crash state*",
        "*after-effect:1 (write_note#1 (milk)): the observed value: 2 → 3 entries*",
        "*after-effect:2 (write_note#2 (eggs)): the observed value: 2 → 3 entries*",
    ])  # fmt: skip
    assert "Traceback" not in result.stdout.str()


@pytest.mark.servers
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


def test_the_tool_depends_on_temporalio_and_the_standard_library_only() -> None:
    allowed = {*sys.stdlib_module_names, "temporalio", "temporal_crashtest", "pytest"}
    for path in SRC.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            assert {n.split(".")[0] for n in names} <= allowed, (path, names)


def test_the_console_script_imports_from_the_working_directory_and_can_force_a_dev_server(
    tmp_path: Path,
) -> None:
    """`temporal-crashtest run` from the folder that holds the app, as `python -m` runs there
    (the app is not on PYTHONPATH), on a private dev server asked for with --dev-server (the
    header says so); an output folder that does not exist is refused before anything runs."""
    script = Path(sys.executable).parent / "temporal-crashtest"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TEMPORAL_ADDRESS")}
    env |= {"NOTES_DIR": str(tmp_path), "NOTES_KEYED": "1"}
    args = [str(script), "run", *NOTES, "--points", "after-effect:1", "--dev-server"]
    done = subprocess.run(args, env=env, cwd=APPS, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "crashtest: as asked: a private dev server on 127.0.0.1:" in done.stderr
    missing = tmp_path / "no-such-folder" / "report.json"
    refused = subprocess.run([*args, "--json", str(missing)], env=env, cwd=APPS,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert last_line(refused) == (
        f"crashtest: error: --json {missing}: the folder {missing.parent} does not exist"
    )


def test_a_run_behind_a_long_timer_names_the_timer(app_env: dict[str, str], tmp_path: Path) -> None:
    """An hour's sleep takes the runs no real time (time skipping); asked for real time, the
    run waits on it, and the tool names the timer."""
    args = ["--worker", "sleeper_app:build", "--workflow", "sleeper_app:SleepsAnHour",
            "--input", "null", "--observe", "notes_app:notes_of", "--deadline-s", "5"]  # fmt: skip
    skipped = crashtest(args, app_env, tmp_path, timeout=60)
    assert skipped.returncode == 1, skipped.stdout + skipped.stderr  # the unkeyed note, twice
    assert "after-effect:1" in skipped.stdout and "does not skip" not in skipped.stderr
    done = crashtest([*args, "--real-time"], app_env, tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "no result within 5 s; the run is running; a timer of 3600.0 s is pending" in (
        last_line(done)
    )


def test_a_plugin_function_is_called_once_per_process(
    app_env: dict[str, str], tmp_path: Path
) -> None:
    """The command checks its --plugin without calling it, the fork server imports it without
    calling it, and each process that needs a client (the command's, every worker) builds it
    once: a plugin that may be built once per process works, forked workers included."""
    args = [*NOTES, "--plugin", "once_plugin:plugin", "--points", "after-effect:1"]
    done = crashtest(args, {**app_env, "NOTES_KEYED": "1"}, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "built twice" not in done.stdout + done.stderr


def test_the_advice_names_the_library_behind_a_thread() -> None:
    """numpy's OpenBLAS pool (pandas imports it) is the usual thread started at import."""
    from temporal_crashtest._run.forkserver import _advice

    blas = _advice(["native thread 'openblas_thread'", "native thread 'openblas_thread'"])
    assert "OPENBLAS_NUM_THREADS=1" in blas and "import it inside the activity" in blas
    assert "in the worker factory" in _advice(["native thread 'tokio-runtime-w'"])
    assert "move the import" in _advice(["Python thread 'metrics-flusher'"])


def test_an_import_that_never_ends_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module that sleeps (waits on a network, a lock, stdin) when imported left the command
    silent for ever; after IMPORT_TIMEOUT_S it is one line."""
    from temporal_crashtest import _loading

    monkeypatch.setattr(_loading, "IMPORT_TIMEOUT_S", 0.3)
    monkeypatch.syspath_prepend(str(APPS))
    left = signal.setitimer(signal.ITIMER_REAL, 0)[0]  # pytest-timeout's, put back after
    try:
        with pytest.raises(InputError, match=r"imported, did not finish within 0.3 s \(a modu"):
            _loading.load("sleepy_import_app:build", "the worker factory")
    finally:
        if left:
            signal.setitimer(signal.ITIMER_REAL, left)
