"""The observers' halves in a worker process: each installed from the settings the crash test
put in the environment, each told which activity attempt runs in the current context (the crash
interceptor's call, before the attempt's code runs)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from temporal_crashtest._observers import http

# One row per observer that needs code in the worker process: (install from the environment,
# True if its settings were there; an attempt starts: (root workflow id, boundary, attempt)).
HALVES: tuple[tuple[Callable[[Mapping[str, str]], bool], Callable[[str, str, int], None]], ...] = (
    (http.install_from_env, http.attempt_started),
)
_installed: list[Callable[[str, str, int], None]] = []


def install_all(environ: Mapping[str, str] = os.environ) -> None:
    """Install each observer whose settings the environment holds."""
    for install, started in HALVES:
        if install(environ) and started not in _installed:
            _installed.append(started)


def attempt_started(root: str, boundary: str, attempt: int) -> None:
    """The attempt of `boundary` in the run rooted at `root` runs in this context."""
    for started in _installed:
        started(root, boundary, attempt)
