"""temporal-crashtest: crash-test any Temporal workflow at every boundary of its run.

A worker interceptor stamps every activity and local activity of the run's tree and SIGKILLs the
worker's own process at one of them; a fresh worker finishes the run, and your view of the final
state is compared with a run that never crashed. Depends on temporalio and the standard library.

The whole crash test is one call::

    report = await run_crash_test(
        Target(workflow="PaymentsWorkflow", input={"customer": "acme"},
               old=Version("myapp.hooks:build_worker")),
        observe=charges_of,
        options=CrashTestOptions(points=["after-effect:charge"], jobs=4),
    )
    assert report.ok, report.failure_text()

The command line (`python -m temporal_crashtest run --help`) and the `crash_test` pytest fixture
are built on it. Everything public is named in `__all__`; the modules whose names start with an
underscore are private. The public modules besides this one are `temporal_crashtest.__main__`
(the command), `temporal_crashtest.worker` (a worker process, `python -m
temporal_crashtest.worker`) and `temporal_crashtest.pytest_plugin` (the fixture).

Errors, one tree (`CrashTestError` is the base the command line catches):

    CrashTestError                  the crash test cannot run as asked
    ├── InputError (ValueError)     an argument that does not load or parse
    │   └── CrashPointError         a crash point written wrong, or naming no boundary
    ├── ServerUnreachable (ConnectionError)
    │                               no Temporal server answers, or no such namespace
    ├── DevServerError              the private dev server could not be started
    ├── CrashTestAborted            the reference run failed, or the observer broke
    └── DriveTimeout (TimeoutError) a drive helper did not get through in time

The public names are imported on first use, so that the pytest plugin, registered in every
session of an environment that has this installed, loads nothing of Temporal until a test asks.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if sys.version_info < (3, 11):  # noqa: UP036 - say why, rather than fail on a 3.11 feature
    raise ImportError("temporal-crashtest needs Python 3.11 or newer")

__version__ = "0.3.0"

# Each public name, and the private module it lives in.
_WHERE = {
    "Cell": "_report.report",
    "Child": "_run.processes",
    "CrashPoint": "_points.points",
    "CrashPointError": "_errors",
    "CrashTestAborted": "_errors",
    "CrashTestError": "_errors",
    "CrashTestOptions": "_front.options",
    "DevServerError": "_errors",
    "Drive": "_plan.target",
    "DriveTimeout": "_errors",
    "HttpObserver": "_observers.http",
    "InputError": "_errors",
    "Moment": "_points.points",
    "Observe": "_plan.target",
    "Processes": "_run.processes",
    "Report": "_report.report",
    "ServerUnreachable": "_errors",
    "Target": "_plan.target",
    "Untested": "_points.points",
    "Version": "_plan.target",
    "dev_server_command": "_run.devserver",
    "effect": "_worker.effects",
    "run_crash_test": "_front.api",
    "send_signal": "_run.drive",
    "send_update": "_run.drive",
    "wait_until": "_run.drive",
}
__all__ = [
    "Cell",
    "Child",
    "CrashPoint",
    "CrashPointError",
    "CrashTestAborted",
    "CrashTestError",
    "CrashTestOptions",
    "DevServerError",
    "Drive",
    "DriveTimeout",
    "HttpObserver",
    "InputError",
    "Moment",
    "Observe",
    "Processes",
    "Report",
    "ServerUnreachable",
    "Target",
    "Untested",
    "Version",
    "__version__",
    "dev_server_command",
    "effect",
    "run_crash_test",
    "send_signal",
    "send_update",
    "wait_until",
]

if TYPE_CHECKING:
    from temporal_crashtest._errors import (
        CrashPointError,
        CrashTestAborted,
        CrashTestError,
        DevServerError,
        DriveTimeout,
        InputError,
        ServerUnreachable,
    )
    from temporal_crashtest._front.api import run_crash_test
    from temporal_crashtest._front.options import CrashTestOptions
    from temporal_crashtest._observers.http import HttpObserver
    from temporal_crashtest._plan.target import Drive, Observe, Target, Version
    from temporal_crashtest._points.points import CrashPoint, Moment, Untested
    from temporal_crashtest._report.report import Cell, Report
    from temporal_crashtest._run.devserver import dev_server_command
    from temporal_crashtest._run.drive import send_signal, send_update, wait_until
    from temporal_crashtest._run.processes import Child, Processes
    from temporal_crashtest._worker.effects import effect


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'temporal_crashtest' has no attribute {name!r}")
    return getattr(importlib.import_module(f"temporal_crashtest.{module}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
