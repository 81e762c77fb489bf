"""The suite's two tiers, as a pytest plugin (`-p tests.tiers` in pyproject.toml). A test that
needs a real server (Postgres, Temporal, the grocer) or starts processes is marked `servers`, by
the fixtures it takes or by its module's `pytestmark`; `make check` runs the rest, in-process,
in seconds. `make test` runs all."""

from __future__ import annotations

import pytest

# Fixtures that start or reach a real server: tests/conftest.py's and crashtest/tests/conftest.py's.
SERVER_FIXTURES = frozenset(
    {"db_url", "db", "fresh_db_url", "temporal_address", "client", "workers", "grocer_url",
     "mutual_tls", "app_env", "pytester"}
)  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.servers)
