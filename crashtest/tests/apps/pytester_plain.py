"""Run by pytester inside the plugin test: a session that does not use the fixture."""

from __future__ import annotations

import sys

import pytest


def test_nothing_of_temporal_is_loaded(request: pytest.FixtureRequest) -> None:
    assert request.config.pluginmanager.has_plugin("temporal_crashtest")
    assert not [name for name in sys.modules if name.startswith("temporalio")]
