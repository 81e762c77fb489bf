"""The order in which `make test`'s processes take the test files, as a pytest plugin (`-p
tests.schedule` in pyproject.toml): the files that take longest first, the rest as collected.

`make test` runs the files three at a time (pytest-xdist, `--dist loadfile`), each process taking
the next file as one ends. By default xdist hands out the files with the most tests first, so the
few that run long crash tests of their own (one test each, or two) came last: measured here, the
TypeScript file began 550 s into a 700 s run and ran alone for its last 80 s, one core idle. Taken
longest first (LONGEST_FIRST, with `--no-loadscope-reorder`), the short files fill in at the end.

Each process takes one of the first three files, then one of the next three: the two heaviest on
CPU (a crash test of every shape, of every agent framework) are first and fourth, so that the
second starts about when the first ends (measured: shapes 0-123 s, frameworks 117-293 s), beside
files that mostly wait on timeouts (the journal's, the deploys')."""

from __future__ import annotations

import pytest

# Measured quiet on 2 cores (wall s, CPU s): shapes 138, 153; journal 196, 23; deploys 167, 62;
# frameworks 196, 173; chaos 122, 42; typescript 135, 91; the rest under 130 s each, down to 19 s
# (the files not listed take under 16 s each: they fill in at the end).
LONGEST_FIRST = (
    "tests/test_crashtest_shapes.py",
    "tests/test_journal.py",
    "tests/test_deploys.py",
    "tests/test_frameworks.py",
    "tests/test_chaos.py",
    "tests/test_typescript.py",
    "tests/test_temporal.py",
    "tests/test_crashlab.py",
    "tests/test_crashtest.py",
    "crashtest/tests/test_worker_command.py",
    "tests/test_dbos.py",
    "crashtest/tests/test_cli.py",
    "tests/test_hostile_model.py",
    "crashtest/tests/test_outputs.py",
    "crashtest/tests/test_reruns.py",
    "crashtest/tests/test_wire.py",
    "tests/test_grocer.py",
    "tests/test_bench.py",
    "tests/test_temporal_tls.py",
)


def rank(item: pytest.Item) -> int:
    """Where an item's file stands in LONGEST_FIRST; any other file after them all."""
    path = item.nodeid.split("::", 1)[0]
    return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=rank)  # stable: each file's own tests keep their order
