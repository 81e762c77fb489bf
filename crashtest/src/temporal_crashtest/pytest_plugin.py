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
fails.

Registered through the `pytest11` entry point, and inert unless a test uses `crash_test`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from temporal_crashtest._exits import EXIT_ALL_MATCH, EXIT_SOME_DIFFER

if TYPE_CHECKING:
    from temporal_crashtest._report import Report

MARKER = "crashtest"
OPTIONS = (
    "points",
    "jobs",
    "deadline_s",
    "data_converter",
    "address",
    "env",
    "repeat",
    "plugins",
    "real_timeouts",
    "exact",
    "deploy_to",
    "worker_tree",
    "deploy_tree",
    "expect_version",
)


class CrashTest(Protocol):
    def __call__(
        self,
        *,
        worker: Callable[..., Any] | str,
        workflow: type | str,
        input: Any,
        observe: Callable[[str], Any] | str,
        drive: Callable[[Any], Any] | str | None = None,
        expect: Any = None,
        points: str | Iterable[str] | None = None,
        repeat: int | None = None,
        plugins: Iterable[Callable[..., Any] | object | str] | None = None,
        jobs: int | None = None,
        deadline_s: float | None = None,
        data_converter: str | None = None,
        address: str | None = None,
        env: Mapping[str, str] | None = None,
        real_timeouts: bool | None = None,
        exact: bool | None = None,
        deploy_to: Callable[..., Any] | str | None = None,
        worker_tree: str | os.PathLike[str] | None = None,
        deploy_tree: str | os.PathLike[str] | None = None,
        expect_version: str | None = None,
        expect_all_match: bool = True,
    ) -> Report: ...


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**options): options for the crash_test fixture in this test "
        f"({', '.join(OPTIONS)})",
    )


def _command(
    worker: str, workflow: str, input: Any, observe: str, out: Path, options: dict[str, Any]
) -> list[str]:
    cmd = [sys.executable, "-m", "temporal_crashtest", "run", "--worker", worker]
    cmd += ["--workflow", workflow]
    cmd += ["--input", json.dumps(input), "--observe", observe, "--json", str(out)]
    if "expect" in options:
        cmd += ["--expect", json.dumps(options["expect"])]
    if options.get("expect_version") is not None:  # in a deploy test: old or new
        if "expect" in options:
            raise pytest.UsageError("crash_test: expect (a state) or expect_version, not both")
        cmd += ["--expect", str(options["expect_version"])]
    for plugin in options.get("plugins") or ():
        cmd += ["--plugin", plugin]
    points = options.get("points")
    if points is not None:
        cmd += ["--points", points if isinstance(points, str) else ",".join(points)]
    if options.get("real_timeouts"):
        cmd += ["--real-timeouts"]
    if options.get("exact"):
        cmd += ["--exact"]
    names = ["jobs", "deadline_s", "data_converter", "address", "repeat", "drive", "deploy_to"]
    names += ["worker_tree", "deploy_tree"]
    for name in names:
        if options.get(name) is not None:
            cmd += [f"--{name.replace('_', '-')}", str(options[name])]
    return cmd


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
    from temporal_crashtest._report import Report

    marker = request.node.get_closest_marker(MARKER)
    defaults = dict(marker.kwargs) if marker else {}
    unknown = set(defaults) - set(OPTIONS)
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: unknown options {sorted(unknown)}")

    def run(
        *,
        worker: Callable[..., Any] | str,
        workflow: type | str,
        input: Any,
        observe: Callable[[str], Any] | str,
        drive: Callable[[Any], Any] | str | None = None,
        expect_all_match: bool = True,
        **given: Any,
    ) -> Report:
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
            cmd = _command(
                reference_to(worker, "worker"),
                reference_to(workflow, "workflow"),
                input,
                reference_to(observe, "observe"),
                out,
                options,
            )
            done = subprocess.run(
                cmd, env=_environment(options.get("env")), capture_output=True, text=True
            )
            sys.stderr.write(done.stderr)  # its progress, in the test's captured output
            if done.returncode not in (EXIT_ALL_MATCH, EXIT_SOME_DIFFER) or not out.exists():
                lines = done.stderr.strip().splitlines() or ["(nothing on stderr)"]
                pytest.fail(
                    f"the crash test could not run (exit {done.returncode}): {lines[-1]}",
                    pytrace=False,
                )
            report = Report.from_json(json.loads(out.read_text()))
        if expect_all_match and not report.ok:
            pytest.fail(report.failure_text(), pytrace=False)
        return report

    return run
