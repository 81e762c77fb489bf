"""crashtest's pytest plugin: one test crash-tests a workflow at every boundary.

    def test_payments_survive_a_crash_anywhere(crash_test):
        crash_test(worker=build_worker, workflow=PaymentsWorkflow,
                   input={"customer": "acme", ...}, observe=charges_of)

It fails with the boundaries whose final state differs from a run that never crashed, and how.
`worker`, `workflow` and `observe` are module-level functions or classes (or "MODULE:NAME"
strings): the crash test runs `python -m temporal_crashtest run` in a process of its own, which
loads them by name, so the test process never holds a Temporal client. The marker sets options for
a test: `@pytest.mark.crashtest(jobs=4, points="after-effect:2", deadline_s=60)`. `drive=` (a
module-level function given the workflow handle) sends the signals and updates the run waits for;
`expect=` (JSON) is the state a run without a crash must reach, so a reference that already differs
fails. `http=True` (or a host, or a list of hosts) observes the effectful HTTP requests the workers
send, with `observe` or without it; `html=`, `markdown=`, `junit_xml=` write those reports too;
`shard="K/N"` runs one shard's share. Every option of the command line's `run` is here, under
its flag's name (`every_option()`).

Registered through the `pytest11` entry point, and inert unless a test uses `crash_test`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from temporal_crashtest._exits import EXIT_ALL_MATCH, EXIT_SOME_DIFFER

if TYPE_CHECKING:
    from temporal_crashtest._report.report import Report

MARKER = "crashtest"
# Each option a test may give (keyword or marker), and how `python -m temporal_crashtest run`
# takes it: "value" --name VALUE; "flag" --name when true; "joined" --name A,B (a string or a
# list); "optional" --name when True, else as "joined"; "each" --plugin once per item; "expect"
# a deploy test's version for --expect; "env" the command's environment. The report formats but
# JSON (`markdown`, `html`, `junit_xml`) come from `_formats`, the observers' options (`http`,
# ...) from their kinds (`every_option`). A test checks these against the command line's flags
# (crashtest/tests/test_options.py).
OPTIONS: dict[str, str] = {
    "points": "joined",
    "repeat": "value",
    "jobs": "value",
    "deadline_s": "value",
    "real_timeouts": "flag",
    "exact": "flag",
    "shard": "value",
    "data_converter": "value",
    "plugins": "each",
    "env": "env",
    "address": "value",
    "namespace": "value",
    "dev_server": "flag",
    "deploy_to": "value",
    "worker_tree": "value",
    "deploy_tree": "value",
    "worker_cmd": "value",  # in place of `worker`: a worker of any SDK, as a command
    "deploy_cmd": "value",  # in place of `deploy_to`, with `worker_cmd`
    "expect_version": "expect",
    "logs": "value",
}
# The fixture's own arguments: what is tested, and the --json report it reads back.
OWN = ("worker", "workflow", "input", "observe", "drive", "expect", "json")


class CrashTest(Protocol):
    def __call__(
        self,
        *,
        worker: Callable[..., Any] | str | None = None,
        workflow: type | str,
        input: Any,
        observe: Callable[[str], Any] | str | None = None,
        drive: Callable[[Any], Any] | str | None = None,
        expect: Any = None,
        expect_all_match: bool = True,
        **options: Any,
    ) -> Report: ...


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**options): options for the crash_test fixture in this test (each option "
        "of `python -m temporal_crashtest run`, its flag's name with _)",
    )


def _command(
    worker: str | None,
    workflow: str,
    input: Any,
    observe: str | None,
    out: Path,
    options: dict[str, Any],
) -> list[str]:
    cmd = [sys.executable, "-m", "temporal_crashtest", "run"]
    cmd += ["--worker", worker] if worker is not None else []  # or a worker_cmd
    cmd += ["--workflow", workflow, "--input", json.dumps(input), "--json", str(out)]
    cmd += ["--observe", observe] if observe is not None else []
    for name in ("drive", "expect"):
        if name in options:
            value = options[name]
            cmd += [f"--{name}", value if name == "drive" else json.dumps(value)]
    if options.get("expect_version") is not None and "expect" in options:
        raise pytest.UsageError("crash_test: expect (a state) or expect_version, not both")
    for name, how in every_option().items():
        value = options.get(name)
        if value is not None and value is not False:
            cmd += _flag(name, how, value)
    return cmd


def every_option() -> dict[str, str]:
    """OPTIONS, a path option for each report format but JSON (the fixture's own), and each
    observer kind's options."""
    from temporal_crashtest._observers import given
    from temporal_crashtest._report.formats import FORMATS

    formats = {f.flag[2:].replace("-", "_"): "value" for f in FORMATS if f.flag != "--json"}
    observers = {name: how for kind in given.KINDS for name, how in kind.fixture.items()}
    return {**OPTIONS, **formats, **observers}


def _flag(name: str, how: str, value: Any) -> list[str]:
    """The command line's words for one option (see OPTIONS)."""
    flag = f"--{name.replace('_', '-')}"
    if how == "flag":
        return [flag]
    if how == "optional" and value is True:
        return [flag]
    if how in ("joined", "optional"):
        return [flag, value if isinstance(value, str) else ",".join(value)]
    if how == "each":
        return [w for item in value for w in ("--plugin", item)]
    if how == "expect":  # in a deploy test: old or new
        return ["--expect", str(value)]
    if name == "shard" and isinstance(value, tuple):
        return [flag, "/".join(map(str, value))]
    return [] if how == "env" else [flag, str(value)]


def _run_command(cmd: list[str], out: Path, options: dict[str, Any]) -> Report:
    """Run the crash test's command; its report (the test fails if it could not run)."""
    from temporal_crashtest._report.report import Report

    done = subprocess.run(cmd, env=_environment(options.get("env")), capture_output=True, text=True)
    sys.stderr.write(done.stderr)  # its progress, in the test's captured output
    if done.returncode not in (EXIT_ALL_MATCH, EXIT_SOME_DIFFER) or not out.exists():
        lines = done.stderr.strip().splitlines() or ["(nothing on stderr)"]
        pytest.fail(
            f"the crash test could not run (exit {done.returncode}): {lines[-1]}", pytrace=False
        )
    return Report.from_json(json.loads(out.read_text()))


def _environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    """This process's environment, with its import path, so the crash test finds the same
    modules (pytest puts test folders on sys.path that PYTHONPATH does not name)."""
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **(extra or {})}


@pytest.fixture
def crash_test(request: pytest.FixtureRequest) -> CrashTest:
    """`crash_test(worker=..., workflow=..., input=..., observe=...)`: crash the workflow at every
    activity boundary; fail the test, naming the boundaries, unless every one ends in the
    no-crash state. Returns the report (`expect_all_match=False` returns it without failing)."""
    # Imported only by a test that uses crash_test.
    from temporal_crashtest._loading import reference_to

    marker = request.node.get_closest_marker(MARKER)
    defaults = dict(marker.kwargs) if marker else {}
    unknown = set(defaults) - set(every_option())
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: unknown options {sorted(unknown)}")

    def run(
        *,
        worker: Callable[..., Any] | str | None = None,
        workflow: type | str,
        input: Any,
        observe: Callable[[str], Any] | str | None = None,
        drive: Callable[[Any], Any] | str | None = None,
        expect_all_match: bool = True,
        **given: Any,
    ) -> Report:
        unknown = set(given) - set(every_option()) - {"expect"}
        if unknown:
            raise pytest.UsageError(f"crash_test: unknown options {sorted(unknown)}")
        options = {**defaults, **{k: v for k, v in given.items() if v is not None}}
        if "expect" in given:
            options["expect"] = given["expect"]  # None is a value one may expect
        if drive is not None:
            options["drive"] = reference_to(drive, "drive")
        if options.get("plugins"):
            options["plugins"] = [reference_to(p, "plugins") for p in options["plugins"]]
        if options.get("deploy_to") is not None:
            options["deploy_to"] = reference_to(options["deploy_to"], "deploy_to")
        with tempfile.TemporaryDirectory(prefix="crashtest-") as folder:
            out = Path(folder) / "report.json"
            observed = reference_to(observe, "observe") if observe is not None else None
            factory = reference_to(worker, "worker") if worker is not None else None
            what = (factory, reference_to(workflow, "workflow"))
            report = _run_command(_command(*what, input, observed, out, options), out, options)
        if expect_all_match and not report.ok:
            pytest.fail(report.failure_text(), pytrace=False)
        return report

    return run
