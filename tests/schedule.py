"""The order in which `make test`'s processes take the test files, as a pytest plugin (`-p
tests.schedule` in pyproject.toml): TAKEN_FIRST's, in its order, then the rest as collected.

`make test` runs the files four at a time (pytest-xdist, `--dist loadfile`, with
`--no-loadscope-reorder`), each process taking the next file as one ends. By default xdist hands
out the files with the most tests first, so the few that run long crash tests of their own (one
test each, or two) came last: measured here, the TypeScript file began 550 s into a 700 s run and
ran alone for its last 80 s, one core idle.

Two kinds of file share the two cores: those that keep a core busy (crash tests of every shape,
of every agent framework, of worker commands) and those that mostly wait (on timeouts, on a
server restarted, on slow answers). A core idles when the files that run together all wait, so
each file that waits is taken while one that keeps a core busy runs, and the files not listed
(under 16 s each, most of them busy) come last; the short ones listed alternate, one that keeps
a core busy, then one that waits. Measured, the servers' tier of `make test` quiet, three processes:
taken longest first, 597 s (95 core-s idle; the files that wait came together in its last 130 s);
in TAKEN_FIRST's order, 567 s, then 557 s (105 core-s idle, 40 s of it with the short files that
wait together); with those alternating, 550 s (98 core-s idle)."""

from __future__ import annotations

import pytest

# Measured quiet on 2 cores (wall s, CPU s): shapes 138, 110; journal 125, 22; deploys 143, 54;
# frameworks 129, 107; chaos 154, 42; typescript 159, 82; worker_command 77, 70; temporal 80,
# 26; dbos 87, 20; crashlab 94, 49; crashtest 56, 30; cli 76, 26; hostile_model 34, 23; the rest
# under 40 s each.
TAKEN_FIRST = (
    "tests/test_crashtest_shapes.py",
    "tests/test_journal.py",
    "tests/test_deploys.py",
    "tests/test_frameworks.py",
    "tests/test_chaos.py",
    "tests/test_typescript.py",
    "crashtest/tests/test_worker_command.py",
    "tests/test_temporal.py",
    "tests/test_dbos.py",
    "tests/test_crashlab.py",
    "tests/test_crashtest.py",
    "crashtest/tests/test_cli.py",
    # The short files, one that keeps a core busy, then one that waits.
    "tests/test_hostile_model.py",
    "crashtest/tests/test_reruns.py",
    "tests/test_guardrails.py",
    "crashtest/tests/test_outputs.py",
    "crashtest/tests/test_wire.py",
    "tests/test_blocked.py",
    "tests/test_model_adapter.py",
    "tests/test_grocer.py",
    "tests/test_scaffold.py",
    "tests/test_temporal_tls.py",
    "tests/test_reruns.py",
    "tests/test_bench.py",
    "crashtest/tests/test_install.py",
)


def rank(item: pytest.Item) -> int:
    """Where an item's file stands in TAKEN_FIRST; any other file after them all."""
    path = item.nodeid.split("::", 1)[0]
    return TAKEN_FIRST.index(path) if path in TAKEN_FIRST else len(TAKEN_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=rank)  # stable: each file's own tests keep their order
