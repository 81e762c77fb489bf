"""The observers' halves in a worker process: each installed from the settings the crash test
put in the environment (`HALVES_ENV` names their modules), each told which activity attempt runs
in the current context (the crash interceptor's call, before the attempt's code runs)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping

HALVES_ENV = "CRASHTEST_OBSERVER_HALVES"  # the modules of the observers' halves, comma-separated


_installed: list[Callable[[str, str, int], None]] = []


def install_all(environ: Mapping[str, str] = os.environ) -> None:
    """Install each observer half the environment names, from its settings there."""
    for name in filter(None, environ.get(HALVES_ENV, "").split(",")):
        half = importlib.import_module(name)
        if half.install_from_env(environ) and half.attempt_started not in _installed:
            _installed.append(half.attempt_started)


def attempt_started(root: str, boundary: str, attempt: int) -> None:
    """The attempt of `boundary` in the run rooted at `root` runs in this context."""
    for started in _installed:
        started(root, boundary, attempt)
