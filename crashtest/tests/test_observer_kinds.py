"""An observer kind is one module and one row of `given.KINDS` (docs/architecture.md, "To add …
An observer"): a kind written here, put in that row, gets its flags on `run`, its settings from
them, its keywords in the pytest fixture, its check before the test starts, its key in the state,
and its half in the worker installed from the environment and told each attempt. In process."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporal_crashtest import CrashTestOptions
from temporal_crashtest._errors import InputError
from temporal_crashtest._front.cli import parse_args
from temporal_crashtest._observers import Kind, given
from temporal_crashtest._observers.function import UsersView
from temporal_crashtest._option import Option, Part
from temporal_crashtest._worker import halves as in_worker
from temporal_crashtest._worker.halves import HALVES_ENV
from temporal_crashtest.pytest_plugin import _command, keywords

LEDGER_ENV = "TOY_LEDGER"  # the half's settings: the file it appends an attempt's line to


@dataclass(frozen=True)
class LedgerObserver:
    """The toy kind's settings: the table whose rows are the state."""

    table: str

    def check(self) -> None:
        if not self.table.isidentifier():
            raise InputError(f"a ledger table is a name, not {self.table!r}")

    def observer(self, log_dir: Path, deadline_s: float) -> LedgerRows:
        return LedgerRows(self, log_dir / "ledger.txt")


@dataclass(frozen=True)
class LedgerRows:
    settings: LedgerObserver
    file: Path
    name: str = "ledger"
    half: str | None = __name__

    def worker_env(self) -> dict[str, str]:
        return {LEDGER_ENV: str(self.file)}

    async def view(self, workflow_id: str) -> list[str]:
        lines = self.file.read_text().splitlines() if self.file.exists() else []
        return [line for line in lines if line.startswith(f"{workflow_id} ")]

    def untested(self) -> list[tuple[str, str]]:
        return []


_file: list[Path] = []


def install_from_env(environ: Mapping[str, str]) -> bool:
    if LEDGER_ENV not in environ:
        return False
    _file[:] = [Path(environ[LEDGER_ENV])]
    return True


def attempt_started(root: str, boundary: str, attempt: int) -> None:
    with _file[0].open("a") as out:
        out.write(f"{root} {boundary} attempt {attempt}\n")


def _settings(values: Mapping[str, Any]) -> LedgerObserver | None:
    return None if values["ledger"] is None else LedgerObserver(values["ledger"])


KIND = Kind(
    (Option("ledger", "the toy observer: the rows of TABLE", Part.OBSERVER, metavar="TABLE"),),
    _settings,
)
RUN = ["run", "--worker", "m:build", "--workflow", "W", "--input", "{}"]


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(given, "KINDS", (*given.KINDS, KIND))


def test_a_kind_in_the_row_has_its_flags_and_fixture_keywords(toy: None, tmp_path: Path) -> None:
    args = parse_args([*RUN, "--ledger", "orders"])
    assert given.settings_from(args) == (LedgerObserver("orders"),)
    assert given.settings_from(parse_args(RUN)) == ()
    assert "ledger" in keywords()
    cmd = _command(tmp_path / "r.json", {"ledger": "orders"})
    assert cmd[-2:] == ["--ledger", "orders"]
    with pytest.raises(InputError, match="a ledger table is a name"):
        CrashTestOptions(observers=(LedgerObserver("no such"),)).check()


def test_a_kind_in_the_row_observes_and_has_its_half_in_the_worker(
    toy: None, tmp_path: Path
) -> None:
    def observe(workflow_id: str) -> int:
        return 3

    observers = given.observers_for(observe, (LedgerObserver("orders"),), tmp_path, 5.0)
    assert [type(m) for m in observers.members] == [UsersView, LedgerRows]
    env = observers.worker_env()
    assert env[HALVES_ENV] == __name__ and env[LEDGER_ENV] == str(tmp_path / "ledger.txt")
    in_worker.install_all(env)  # as a worker process does, from its environment
    in_worker.attempt_started("wf-1", "charge", 2)
    assert asyncio.run(observers.state("wf-1")) == {
        "observe": 3,
        "ledger": ["wf-1 charge attempt 2"],
    }
    alone = given.observers_for(None, (LedgerObserver("orders"),), tmp_path, 5.0)
    assert asyncio.run(alone.state("wf-2")) == []
    with pytest.raises(InputError, match="observers given twice: ledger"):
        given.observers_for(None, (LedgerObserver("a"), LedgerObserver("b")), tmp_path, 5.0)


def test_the_http_observers_half_is_a_module_with_its_two_calls(tmp_path: Path) -> None:
    import importlib

    from temporal_crashtest import HttpObserver

    half = HttpObserver().observer(tmp_path, 1.0).half
    assert half is not None
    module = importlib.import_module(half)
    assert callable(module.install_from_env) and callable(module.attempt_started)
