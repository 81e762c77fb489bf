"""temporal-crashtest: crash-test any Temporal workflow at every boundary of its run.

A worker interceptor stamps every activity and local activity of the run's tree and SIGKILLs the
worker's own process at one of them (`CrashInterceptor`); a fresh worker finishes the run, and
the user's view of the final state is compared with a run that never crashed (`Runner`).
`python -m temporal_crashtest run --help` for the command line; the `crash_test` pytest fixture
for tests. Depends on temporalio and the standard library only.

The public names below are imported on first use, so that the pytest plugin, registered in every
session of an environment that has this installed, loads nothing of Temporal until a test asks.

Errors: `CrashPointError` (a crash point written wrong, or naming no boundary; a ValueError),
`CrashTestError` (the crash test cannot go on: the reference run failed, observe is broken).
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if sys.version_info < (3, 11):  # noqa: UP036 - say why, rather than fail on a 3.11 feature
    raise ImportError("temporal-crashtest needs Python 3.11 or newer")

__version__ = "0.2.0"

_WHERE = {
    "Cell": "report",
    "CellPoint": "runner",
    "CrashInterceptor": "interceptor",
    "CrashPoint": "points",
    "CrashPointError": "points",
    "CrashSite": "interceptor",
    "CrashTestError": "runner",
    "Moment": "points",
    "Processes": "processes",
    "Reference": "runner",
    "Report": "report",
    "Runner": "runner",
    "Target": "runner",
    "Untested": "report",
    "replace_observe": "runner",
    "run_cells": "runner",
}
__all__ = [
    "Cell",
    "CellPoint",
    "CrashInterceptor",
    "CrashPoint",
    "CrashPointError",
    "CrashSite",
    "CrashTestError",
    "Moment",
    "Processes",
    "Reference",
    "Report",
    "Runner",
    "Target",
    "Untested",
    "__version__",
    "replace_observe",
    "run_cells",
]

if TYPE_CHECKING:
    from temporal_crashtest.interceptor import CrashInterceptor, CrashSite
    from temporal_crashtest.points import CrashPoint, CrashPointError, Moment
    from temporal_crashtest.processes import Processes
    from temporal_crashtest.report import Cell, Report, Untested
    from temporal_crashtest.runner import (
        CellPoint,
        CrashTestError,
        Reference,
        Runner,
        Target,
        replace_observe,
        run_cells,
    )


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'temporal_crashtest' has no attribute {name!r}")
    return getattr(importlib.import_module(f"temporal_crashtest.{module}"), name)
