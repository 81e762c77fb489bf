"""The same verdicts on a loaded machine: a set of crash tests run while busy processes take the
CPU (4 per core, each ending by itself within LOAD_FOR_S), and every verdict must be the one a
quiet run gives (the failing points asserted here are those the quiet runs of the shape and agent
tests find). CI machines are shared and noisy: a crash test that answers otherwise there is
wrong. The grocery agent's grouped crash tests run here only: tests/test_crashtest.py runs them
--exact, and asserts the same failing points. Marked `loaded`: `make test` runs it alone, after
the rest of the suite, so that the load it makes is the load it means."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashlab.lab import grocery_crashtest_args
from tests.helpers import child_env, crashtest_runs, failing
from tests.test_crashtest_shapes import RUNS, with_commits

pytestmark = [pytest.mark.servers, pytest.mark.loaded]
BUSY_PER_CORE = 4
LOAD_FOR_S = 420  # each busy process ends by itself after this, whatever happens to the test
AGENT = [*grocery_crashtest_args("household-1"), "--jobs", "6"]

# Each crash test, and the points a quiet run finds failing (none: all ✓): an unkeyed write
# repeats killed after the activity returned and after the write's commit inside it. The
# parallel charges first: they take longest (44 s here, loaded; each charge answers 2 s after
# the one before), mostly waiting, while the others run beside them.
EXPECTED: dict[str, tuple[list[str], dict[str, str], set[str]]] = {
    "parallel-unkeyed": (
        RUNS["parallel-unkeyed"], {},
        with_commits({"after-effect:1", "after-effect:2", "after-effect:3"}),
    ),
    "agent-keyed": (AGENT, {}, set()),
    "agent-unkeyed": (
        AGENT, {"KEY_STRATEGY": "none"},
        with_commits({f"after-effect:{n}" for n in (1, 3, 5, 6, 7)}),
    ),
    "cancelled-unkeyed": (RUNS["cancelled-unkeyed"], {}, with_commits({"after-effect:1"})),
    "approval-unkeyed": (
        RUNS["approval-unkeyed"], {}, with_commits({"after-effect:1", "after-effect:2"})
    ),
    "local-unkeyed": (RUNS["local-unkeyed"], {}, with_commits({"after-effect:1"})),
    "optional-keyed": (RUNS["optional-keyed"], {}, set()),
    "parallel-slow-keyed": (RUNS["parallel-slow-keyed"], {}, set()),
}  # fmt: skip


# Crash tests at once, beside the busy processes (a CI job runs one at a time): measured here,
# the ten in 68.6 s two at a time, 49.8 s three at a time, with the same exit codes.
AT_ONCE = 3
EXACT_TOO = ("cancelled-unkeyed", "approval-unkeyed")


ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the SDK core's console colours
WARNING_LINES = 8  # of the workers' logs, shown for a crash test that answered otherwise


def workers_warnings(stderr: str) -> list[str]:
    """What a crash test's workers warned of (the SDK's failed or timed-out workflow tasks, a
    deadlock), last lines first cut: the logs' folder is gone with the CI machine, so a wrong
    verdict carries them."""
    found = re.search(r"the workers' logs are in (\S+)", stderr)
    if found is None:
        return stderr.strip().splitlines()[-2:]
    lines = [
        f"{log.stem}: {line.strip()[:240]}"
        for log in sorted(Path(found.group(1)).glob("*.log"))
        for line in ANSI.sub("", log.read_text(errors="replace")).splitlines()
        if re.search(r"WARN|ERROR|TMPRL|Traceback", line)
    ]
    return lines[-WARNING_LINES:] or stderr.strip().splitlines()[-2:]


@pytest.fixture
def busy_cpu() -> Iterator[int]:
    """BUSY_PER_CORE busy processes per core for the test (each ends by itself after
    LOAD_FOR_S); yields how many."""
    count = BUSY_PER_CORE * (os.cpu_count() or 1)
    spin = f"import time\nend = time.monotonic() + {LOAD_FOR_S}\nwhile time.monotonic() < end: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(count)]
    try:
        yield count
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.mark.timeout(2 * LOAD_FOR_S + 60)  # the crash tests may outlast the load
def test_verdicts_on_a_loaded_machine_are_a_quiet_machines(
    db_url: str, temporal_address: str, tmp_path: Path, busy_cpu: int
) -> None:
    env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address)
    # Grouped (the default), and the two whose grouped and --exact verdicts once differed
    # under load also --exact (a run per point).
    runs = {name: (args, extra) for name, (args, extra, _) in EXPECTED.items()}
    runs |= {f"{name} --exact": ([*runs[name][0], "--exact"], runs[name][1]) for name in EXACT_TOO}
    started = time.monotonic()
    results = crashtest_runs(runs, env, tmp_path, timeout=LOAD_FOR_S, at_once=AT_ONCE)
    load = os.getloadavg()[0]
    wrong = {}
    for name, (done, report) in results.items():
        failing_points = EXPECTED[name.removesuffix(" --exact")][2]
        found = failing(report) if report else None
        if done.returncode != (1 if failing_points else 0) or found != failing_points:
            cells = [
                (c["crash_at"], c["diff"]) for c in report.get("cells", []) if not c["matches"]
            ]
            wrong[name] = (done.returncode, cells, workers_warnings(done.stderr))
    seconds = time.monotonic() - started
    assert not wrong, f"{busy_cpu} busy processes, load {load:.1f}, {seconds:.0f} s: {wrong}"
    print(f"{busy_cpu} busy processes, load {load:.1f}: {len(runs)} tests in {seconds:.0f} s")
