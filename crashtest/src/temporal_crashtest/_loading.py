"""`MODULE:NAME` references: what the user hands the crash test, loaded with clear errors.

Worker factories and workflows are loaded again in the worker processes, so they must be
importable by name from the working directory (or PYTHONPATH): a module-level function or class.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from types import FrameType
from typing import Any, NoReturn, TypeVar

from temporalio.client import Plugin
from temporalio.converter import DataConverter

from temporal_crashtest._errors import InputError

T = TypeVar("T")
# A module's import takes seconds at most (a framework's); one that has not ended by then never
# will (it sleeps, waits on a network or a lock, or reads stdin).
IMPORT_TIMEOUT_S = 60.0


class _Stopped(BaseException):
    """An import that ended the process (`os._exit`) or outran IMPORT_TIMEOUT_S, stopped."""


@contextlib.contextmanager
def _guarded(what: str) -> Iterator[None]:
    """Around the import of the user's module: one that exits the process (`sys.exit`,
    `os._exit`), or does not end within IMPORT_TIMEOUT_S, is one InputError naming `what`, not
    a crash test that ends silently, with any exit code (0 among them), or never."""
    real_exit = os._exit

    def no_exit(status: int) -> NoReturn:
        raise _Stopped(f"called os._exit({status})")

    def too_long(_sig: int, _frame: FrameType | None) -> None:
        raise _Stopped(f"did not finish within {IMPORT_TIMEOUT_S:g} s")

    timed = (
        threading.current_thread() is threading.main_thread()
        and hasattr(signal, "setitimer")
        and not signal.getitimer(signal.ITIMER_REAL)[0]  # not another's timer (a test's)
    )
    before = signal.signal(signal.SIGALRM, too_long) if timed else None
    if timed:
        signal.setitimer(signal.ITIMER_REAL, IMPORT_TIMEOUT_S)
    os._exit = no_exit
    try:
        yield
    except SystemExit as err:
        raise InputError(f"{what} exited when imported (sys.exit({err.code!r}))") from None
    except _Stopped as err:
        hint = " (a module that sleeps, waits on a network or a lock, or reads stdin?)"
        raise InputError(f"{what}, imported, {err}{hint if 'within' in str(err) else ''}") from None
    finally:
        os._exit = real_exit
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, before)


def load(reference: str, what: str) -> Any:
    module_name, colon, attribute = reference.partition(":")
    if not colon or not module_name or not attribute:
        raise InputError(f"{what} {reference!r}: expected MODULE:NAME, e.g. myapp.worker:build")
    try:
        with _guarded(f"{what} {reference!r}: {module_name!r}"):
            module = (
                sys.modules[module_name]
                if module_name in sys.modules
                else importlib.import_module(module_name)
            )
    except InputError:
        raise
    except Exception as err:  # the user's module may fail to import in any way
        raise InputError(
            f"{what} {reference!r}: cannot import {module_name!r} "
            f"({type(err).__name__}: {err}); is it importable from this directory?"
        ) from None
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise InputError(f"{what} {reference!r}: {module_name!r} has no {attribute!r}")
        value = getattr(value, part)
    return value


def load_callable(reference: str, what: str) -> Callable[..., Any]:
    value = load(reference, what)
    if not callable(value):
        raise InputError(f"{what} {reference!r} is not a function")
    return value


def load_data_converter(reference: str | None) -> DataConverter:
    if reference is None:
        return DataConverter.default
    value = load(reference, "--data-converter")
    if not isinstance(value, DataConverter):
        raise InputError(f"--data-converter {reference!r} is not a temporalio DataConverter")
    return value


def load_plugins(references: Sequence[str], *, build: bool = True) -> list[Plugin]:
    """`--plugin MODULE:NAME`, each a `temporalio.client.Plugin`, or a function (or a plugin
    class) returning one or a list of them, called with no arguments — once per process:
    `build=False` only imports and checks the names (before a fork, or to check the input),
    so that a plugin that rewrites what it is given (LangGraph's, its graphs) is built once."""
    plugins: list[Plugin] = []
    for reference in references:
        value = load(reference, "--plugin")
        if not build:
            if not (isinstance(value, Plugin | list | tuple) or callable(value)):
                raise InputError(
                    f"--plugin {reference!r} is a {type(value).__name__}, not a "
                    "temporalio.client.Plugin (or a function returning one or a list)"
                )
            continue
        if not isinstance(value, Plugin) and callable(value):
            try:
                value = value()
            except Exception as err:  # the user's function may fail in any way
                raise InputError(
                    f"--plugin {reference!r} raised {type(err).__name__}: {err}"
                ) from None
        found = value if isinstance(value, list | tuple) else [value]
        for plugin in found:
            if not isinstance(plugin, Plugin):
                raise InputError(
                    f"--plugin {reference!r} is a {type(plugin).__name__}, not a "
                    "temporalio.client.Plugin (or a function returning one or a list)"
                )
            plugins.append(plugin)
    return plugins


def workflow_type(reference: str) -> str:
    """The workflow type name of MODULE:CLASS (a @workflow.defn class), or a bare type name."""
    if ":" not in reference:
        return reference
    cls = load(reference, "--workflow")
    name = _workflow_name(cls) if isinstance(cls, type) else None
    if name is None:
        raise InputError(f"--workflow {reference!r} is not a @workflow.defn class")
    return name


def _workflow_name(cls: type) -> str | None:
    """The workflow type `@workflow.defn` gave a class. No public API names it: the SDK's private
    definition (temporalio 1.35 to 2, pinned in pyproject), else the attribute it sets."""
    try:
        from temporalio.workflow import _Definition
    except ImportError:  # a later SDK that moved it: the attribute @workflow.defn sets
        definition = cls.__dict__.get("__temporal_workflow_definition")
    else:
        definition = _Definition.from_class(cls)
    name = getattr(definition, "name", None)
    return name if isinstance(name, str) else None


async def call(fn: Callable[..., T | Awaitable[T]], *args: object) -> T:
    """Call a function that may be sync or async."""
    result = fn(*args)
    if inspect.isawaitable(result):
        return await result
    return result
