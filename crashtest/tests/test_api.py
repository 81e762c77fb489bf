"""The public surface: every name in `__all__` resolves, and importing the package loads nothing
of Temporal (the pytest plugin imports it in every session)."""

from __future__ import annotations

import subprocess
import sys

import temporal_crashtest


def test_every_public_name_resolves() -> None:
    assert temporal_crashtest.__version__
    for name in temporal_crashtest.__all__:
        assert getattr(temporal_crashtest, name) is not None, name


def test_importing_the_package_loads_no_temporal_code() -> None:
    probe = (
        "import sys, temporal_crashtest; "
        "print(any(m.startswith('temporalio') for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
