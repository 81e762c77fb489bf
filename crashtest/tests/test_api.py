"""The public surface: every name in `__all__` resolves, it is the whole surface (every other
module is private), one error tree, and importing the package loads nothing of Temporal (the
pytest plugin imports it in every session)."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import temporal_crashtest
from temporal_crashtest import pytest_plugin
from temporal_crashtest._front.cli import parse_args


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


PUBLIC_MODULES = {"__init__", "__main__", "worker", "pytest_plugin"}
PACKAGE = Path(temporal_crashtest.__file__).parent


def test_all_is_the_surface_and_every_other_module_is_private() -> None:
    """One surface: `__all__` names exactly what `__init__` exports, each defined in a private
    module (`_x.py`, or a module of a private package, `_x/y.py`); the only other public modules
    are the ones a user names on a command line or in pytest's plugin list."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    modules |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert {m for m in modules if not m.startswith("_")} | {"__init__", "__main__"} == (
        PUBLIC_MODULES
    )
    exported = set(temporal_crashtest.__all__) - {"__version__"}
    assert exported == set(dir(temporal_crashtest)) - {"__version__"}
    for name in exported:
        value = getattr(temporal_crashtest, name)
        where = getattr(value, "__module__", None)
        if where is not None and where.startswith("temporal_crashtest"):
            private = any(part.startswith("_") for part in where.split(".")[1:])
            assert private, f"{name} lives in {where}"


def test_one_error_tree() -> None:
    """Every exception the tool defines for a user's mistake or a server descends from
    CrashTestError; the private ones (a cell that could not run, caught inside) start with _ or
    are named in `_errors.INSIDE`."""
    from temporal_crashtest._errors import INSIDE

    base = temporal_crashtest.CrashTestError
    for path in PACKAGE.glob("_*.py"):
        module = importlib.import_module(f"temporal_crashtest.{path.stem}")
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
                and value not in INSIDE
            ):
                assert issubclass(value, base), f"{path.name}: {name} is not a CrashTestError"
    assert issubclass(temporal_crashtest.CrashPointError, temporal_crashtest.InputError)
    assert issubclass(temporal_crashtest.InputError, ValueError)
    assert issubclass(temporal_crashtest.ServerUnreachable, ConnectionError)


def test_the_one_call_documents_its_arguments() -> None:
    assert "Args:" in (inspect.getdoc(temporal_crashtest.run_crash_test) or "")
    assert "Returns:" in (inspect.getdoc(temporal_crashtest.run_crash_test) or "")
    assert "Raises:" in (inspect.getdoc(temporal_crashtest.run_crash_test) or "")


def test_every_option_of_the_pytest_fixture_is_a_flag_of_the_command(tmp_path: Path) -> None:
    """The fixture runs the command: each option it takes must become a flag the command parses
    (a typo or a missing flag would fail every test that uses it)."""
    values: dict[str, Any] = {
        "points": "after-effect:1",
        "jobs": 2,
        "deadline_s": 5.0,
        "data_converter": "m:dc",
        "address": "127.0.0.1:7233",
        "repeat": 2,
        "plugins": ["m:p"],
        "real_timeouts": True,
        "exact": True,
        "deploy_to": "m2:w",
        "worker_tree": "../base",
        "deploy_tree": ".",
        "expect_version": "new",
    }
    assert set(values) <= set(pytest_plugin.keywords())  # all of them: test_options.py
    given = {"worker": "m:w", "workflow": "m:W", "input": {"a": 1}, "observe": "m:o", **values}
    cmd = pytest_plugin._command(tmp_path / "r.json", given)
    args = parse_args(cmd[3:])
    assert args.exact and args.real_timeouts and args.jobs == 2 and args.repeat == 2
    assert args.points == ["after-effect:1"] and args.plugins == ["m:p"]
    assert args.deploy_to == "m2:w"
    assert (args.worker_tree, args.deploy_tree, args.expect_version) == ("../base", ".", "new")
