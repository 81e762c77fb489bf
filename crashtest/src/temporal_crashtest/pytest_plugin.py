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
its name (`keywords()`: the flag without `--`, with `_`), and `env=` for the crash test's
environment.

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

from temporal_crashtest._errors import InputError
from temporal_crashtest._exits import EXIT_ALL_MATCH, EXIT_SOME_DIFFER
from temporal_crashtest._option import Reads

if TYPE_CHECKING:
    from temporal_crashtest._option import Option
    from temporal_crashtest._report.report import Report

MARKER = "crashtest"
OWN_REPORT = "json"  # the --json report the fixture writes and reads back: not the test's to give
ENV = "env"  # the crash test's process environment (the command line has its own)


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


def keywords() -> dict[str, Option]:
    """Each option a test may give (keyword or marker), by name: every option the command line
    has (`_front.options.every_option`), and `env`."""
    from temporal_crashtest._front.options import every_option

    return {
        o.name: o
        for o in every_option()
        if (o.reads is not Reads.NO_FLAG or o.name == ENV) and o.name != OWN_REPORT
    }


def _command(out: Path, options: Mapping[str, Any]) -> list[str]:
    """`python -m temporal_crashtest run`'s words for the options a test gave (None: not given,
    but for a JSON option such as `expect`, where None is a value)."""
    declared = keywords()
    cmd = [sys.executable, "-m", "temporal_crashtest", "run", "--json", str(out)]
    for name, value in options.items():
        if value is not None or declared[name].reads is Reads.JSON:
            cmd += declared[name].words(value)
    return cmd


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
    marker = request.node.get_closest_marker(MARKER)
    defaults = dict(marker.kwargs) if marker else {}
    if unknown := set(defaults) - set(keywords()):
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: unknown options {sorted(unknown)}")

    def run(*, expect_all_match: bool = True, **given: Any) -> Report:
        if unknown := set(given) - set(keywords()):
            raise pytest.UsageError(f"crash_test: unknown options {sorted(unknown)}")
        if given.get("expect_version") is not None and "expect" in given:
            raise pytest.UsageError("crash_test: expect (a state) or expect_version, not both")
        options = {**defaults, **given}
        with tempfile.TemporaryDirectory(prefix="crashtest-") as folder:
            out = Path(folder) / "report.json"
            try:
                cmd = _command(out, options)
            except InputError as err:
                raise pytest.UsageError(f"crash_test: {err}") from None
            report = _run_command(cmd, out, options)
        if expect_all_match and not report.ok:
            pytest.fail(report.failure_text(), pytrace=False)
        return report

    return run
