"""Helpers for the tests: run commands as a user types them, read what a run left behind."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agent.data import EXAMPLE_WEEK, GroceryRequest, GroceryResult
from agent.outcome import RUN_STATE_SQL, RunState, run_state_params
from crashlab.lab import crashing_worker
from infra.db import connect_postgres, ensure_schema
from infra.processes import free_port, listening
from workflows.grocery import GroceryAgentWorkflow

ROOT = Path(__file__).resolve().parent.parent
RESULT_TIMEOUT_S = 60
# The budget of a module whose crash tests all run once, in its first test's setup (the shapes,
# the deploys, the frameworks): 250-410 s each quiet, and past 900 s beside four busy loops per
# core with the four of them set up at once, where every test of a module then failed on the
# budget alone. A hung test still fails by name, well inside CI's 90 minutes.
MODULE_BUDGET_S = 1800


def new_run_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# The test grocer's two accounts: the household's (every agent in the tests) and a stranger's.
GROCER_API_KEY = "household-account-key-0123456789"
STRANGER_API_KEY = "stranger-account-key-9876543210"
GROCER_API_KEYS = f"household={GROCER_API_KEY},stranger={STRANGER_API_KEY}"
GROCER_TTL_S = 1.0  # the test grocer forgets an idempotency key after this


def wait_listening(proc: subprocess.Popen[str], port: int, timeout_s: float = 30) -> None:
    """Until the service `proc` started answers on 127.0.0.1:`port`; fails the test with what it
    printed if it exits first or does not answer in `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not listening("127.0.0.1", port):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
        time.sleep(0.05)


@contextlib.contextmanager
def running_grocer(
    db_url: str, *args: str, log_path: Path | None = None, **env: str
) -> Iterator[str]:
    """`python -m grocer ARGS` on a free port, with `env` added (its log into `log_path`, if
    given); yields its URL, then stops it with SIGTERM, which must be a clean stop."""
    port = free_port()
    log = log_path.open("w") if log_path is not None else subprocess.PIPE
    proc = subprocess.Popen(
        [sys.executable, "-m", "grocer", "--port", str(port), *args], cwd=ROOT,
        env=child_env(db_url, **env), stdout=subprocess.DEVNULL, stderr=log, text=True,
    )  # fmt: skip
    try:
        wait_listening(proc, port)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        assert proc.wait(10) == 0, log_path.read_text() if log_path else proc.communicate()[1]
        if log_path is not None:
            log.close()  # type: ignore[union-attr]


def child_env(db_url: str, **extra: str) -> dict[str, str]:
    """The environment for a child process: the test's database, the test grocer's household
    key, and no inherited CRASH_AT."""
    env = {k: v for k, v in os.environ.items() if k != "CRASH_AT"}
    env["DATABASE_URL"] = db_url
    env["GROCER_API_KEY"] = GROCER_API_KEY
    env.update(extra)
    return env


def run_python(
    args: list[str], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` from the project root, as a user types it; output captured."""
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


CrashtestRun = tuple[subprocess.CompletedProcess[str], dict[str, Any]]


def crashtest_runs(
    runs: dict[str, tuple[list[str], dict[str, str]]],
    env: dict[str, str],
    out: Path,
    timeout: float = 300,
    at_once: int | None = None,
) -> dict[str, CrashtestRun]:
    """Several `python -m temporal_crashtest run ARGS` at once (a cell mostly waits on
    timeouts; `at_once`: at most this many, the next starting as one ends), each with more
    environment; each one's output and JSON report ({} where it wrote none)."""
    waiting = list(runs)
    limit = at_once or len(waiting) or 1
    running: dict[str, subprocess.Popen[str]] = {}
    ended: dict[str, subprocess.CompletedProcess[str]] = {}
    readers = concurrent.futures.ThreadPoolExecutor(max_workers=limit)
    reading: dict[str, concurrent.futures.Future[tuple[str, str]]] = {}
    deadline = time.monotonic() + timeout * max(1, -(-len(waiting) // limit))
    try:
        while waiting or running:
            while waiting and len(running) < limit:  # a free place: the next one starts now
                name = waiting.pop(0)
                args, extra = runs[name]
                cmd = [sys.executable, "-m", "temporal_crashtest", "run", *args,
                       "--json", str(out / f"{name}.json")]  # fmt: skip
                running[name] = subprocess.Popen(
                    cmd, cwd=ROOT, env={**env, **extra}, text=True,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                )  # fmt: skip
                reading[name] = readers.submit(running[name].communicate)
            done, _ = concurrent.futures.wait(
                [reading[n] for n in running], timeout=max(0.0, deadline - time.monotonic()),
                return_when=concurrent.futures.FIRST_COMPLETED,
            )  # fmt: skip
            assert done, f"crash tests still running after {timeout} s each: {list(running)}"
            for name in [n for n in running if reading[n] in done]:
                proc = running.pop(name)
                stdout, stderr = reading[name].result()
                ended[name] = subprocess.CompletedProcess(
                    proc.args, proc.returncode, stdout, stderr
                )
    finally:
        for proc in running.values():
            proc.kill()
        readers.shutdown(wait=False)
    results: dict[str, CrashtestRun] = {}
    for name in runs:
        path = out / f"{name}.json"
        results[name] = (ended[name], json.loads(path.read_text()) if path.exists() else {})
    return results


GROUPED = "~grouped"


def verdicts(run: CrashtestRun) -> tuple[int, dict[str, bool]]:
    """A crash test's exit code and its verdict at each crash point."""
    done, report = run
    return done.returncode, {c["crash_at"]: c["matches"] for c in report.get("cells", [])}


HELD_RETURNED = "more it held (returned, not yet reported"  # a fast-forward's line (_fastforward)


def errored(run: CrashtestRun, points: set[str]) -> set[str]:
    """Of `points`, those whose cell this run could not run as designed (it says why: a machine
    too loaded to tell the crash's doing from the load's): no verdict."""
    _, report = run
    return {
        c["crash_at"] for c in report.get("cells", []) if c["crash_at"] in points and c["error"]
    }


def racing(run: CrashtestRun, points: set[str]) -> set[str]:
    """Of `points`, those this run failed with a parallel sibling the dead worker held: in
    flight at the kill, returned with its completion not yet reported (the fast-forward says
    so), or handed to the worker and not yet begun (its recovery waited on that sibling's
    timeout). Whether the sibling had made its (unkeyed) effect when the worker died is a race,
    in production as in any two runs of either mode."""
    _, report = run
    return {
        c["crash_at"]
        for c in report.get("cells", [])
        if c["crash_at"] in points
        and not c["matches"]
        and (
            c["in_flight"]
            or any(HELD_RETURNED in f for f in c.get("fast_forward", []))
            or any(_sibling_timeout(c["activity"], w) for w in c.get("waited_on", []))
        )
    }


def _sibling_timeout(activity: str, waited: str) -> bool:
    """`waited` is another activity's own timeout (`charge#3 (i-3) heartbeat timeout 2.0 s`)."""
    found = re.match(r"(.+) (?:heartbeat|start-to-close|schedule-to-close) timeout ", waited)
    return found is not None and not found[1].startswith("workflow task") and found[1] != activity


@dataclass(frozen=True)
class BothWays:
    """Crash tests run twice, `--exact` (a run per point) and grouped (the default: several
    points crashed in one run, split where the group differs), or one of the two; `exact[name]`
    carries each point's own recovery."""

    exact: dict[str, CrashtestRun]
    grouped: dict[str, CrashtestRun]
    wire: dict[str, CrashtestRun] = field(default_factory=dict)

    def __getitem__(self, name: str) -> CrashtestRun:
        """The `--exact` run, else the grouped one (a test run one way only)."""
        return self.exact[name] if name in self.exact else self.grouped[name]

    def assert_agree(self, *names: str) -> None:
        """The verdicts of `names` (all: none named) are the same point by point both ways, and
        the exit codes, but for a point one side failed in a race with a parallel sibling
        (`racing`); a point only one side made must pass. A test run one way only agrees."""
        differ: dict[str, object] = {}
        for name in names or tuple(self.grouped):
            if name not in self.exact or name not in self.grouped:
                continue
            exact, grouped = self.exact[name], self.grouped[name]
            (code, by_exact), (grouped_code, by_grouped) = verdicts(exact), verdicts(grouped)
            points = {
                p for p in by_exact.keys() & by_grouped.keys() if by_exact[p] != by_grouped[p]
            }
            # A point only one side made: the two references ended differently after their last
            # boundary (closed in the task that took its result, or not: timing), and the other
            # side listed it as not tested. It must pass where it was made.
            alone = {
                p for p in by_exact.keys() ^ by_grouped.keys() if not {**by_exact, **by_grouped}[p]
            }
            if (
                code != grouped_code
                or alone
                or points - racing(exact, points) - racing(grouped, points)
            ):
                differ[name] = ((code, by_exact), (grouped_code, by_grouped))
                differ[name + " cells"] = [
                    _why(exact, points | alone),
                    _why(grouped, points | alone),
                ]
        assert not differ, f"grouped and --exact verdicts differ (exact, grouped): {differ}"

    def wire_rows(self) -> list[WireRow]:
        """Each shape run on the wire too, against its grouped run in process."""
        rows = []
        for name, wire in self.wire.items():
            code, in_process = verdicts(self.grouped[name])
            wire_code, on_the_wire = verdicts(wire)
            rows.append(WireRow(name, in_process, on_the_wire, (code, wire_code)))
        return rows

    def assert_wire_agrees(self, named: dict[tuple[str, str], str]) -> str:
        """On the wire as in process, every point both made has the same verdict (but for a
        race with a parallel sibling, `racing`, or a difference `named`, with why); a point only
        the interceptor made is one the wire does not (`OFF_THE_WIRE`), listed as not tested
        there; the wire makes none the interceptor does not, and exits alike. The table."""
        wrong: dict[str, object] = {}
        for row in self.wire_rows():
            wire, grouped = self.wire[row.name], self.grouped[row.name]
            # A cell the machine was too loaded to run (it says so) is no verdict to compare.
            raced = racing(wire, row.differ) | racing(grouped, row.differ)
            raced |= errored(wire, row.differ) | errored(grouped, row.differ)
            unnamed = {p for p in row.differ - raced if (row.name, p) not in named}
            only_here = {p for p in row.in_process.keys() - row.on_the_wire.keys()}
            untested = {u["boundary"].split(" ")[0] for u in wire[1].get("untested", [])}
            listed_here = {u["boundary"].split(" ")[0] for u in grouped[1].get("untested", [])}
            # A point only one side made where the two references ended differently after their
            # last boundary (in the task that took its result, or not: timing), the other side
            # listing it as not tested: it must pass where it was made (as `assert_agree`), or
            # say it could not be run (a machine too loaded: no verdict).
            no_verdict = errored(wire, set(row.on_the_wire)) | errored(grouped, set(row.in_process))
            timing = {
                p for p in only_here if p in untested and (row.in_process[p] or p in no_verdict)
            }
            timing |= {
                p
                for p in row.on_the_wire.keys() - row.in_process.keys()
                if p in listed_here and (row.on_the_wire[p] or p in no_verdict)
            }
            not_off = {p for p in only_here - timing if not OFF_THE_WIRE.match(p)}
            only_there = row.on_the_wire.keys() - row.in_process.keys() - timing
            unlisted = {p for p in only_here if p not in untested and not p.startswith("effect:")}
            if unnamed or not_off or only_there or unlisted or len(set(row.codes)) > 1:
                wrong[row.name] = {
                    "differ": sorted(unnamed), "only in process": sorted(not_off),
                    "only on the wire": sorted(only_there), "not listed": sorted(unlisted),
                    "exit codes (in process, wire)": row.codes,
                }  # fmt: skip
        table = "\n".join(
            ["| shape | points both made | ✗ in both | verdicts | in process only |",
             "|---|---|---|---|---|", *(row.line() for row in self.wire_rows())]
        )  # fmt: skip
        assert not wrong, f"the wire and the interceptor disagree: {wrong}\n{table}"
        return table

    def assert_some_point_cleared_in_a_group(self) -> None:
        reports = [run[1] for run in self.grouped.values()]
        assert any(c.get("group", 1) > 1 for r in reports for c in r.get("cells", [])), (
            "no point was cleared in a group"
        )


def run_both_ways(
    runs: dict[str, tuple[list[str], dict[str, str]]],
    env: dict[str, str],
    out: Path,
    timeout: float = 300,
    at_once: int | None = None,
    grouped_too: set[str] | None = None,
    grouped_only: frozenset[str] = frozenset(),
    on_the_wire: frozenset[str] = frozenset(),
) -> BothWays:
    """Each crash test `--exact` and grouped (`grouped_too`: only these grouped as well; None:
    all; `grouped_only`: these grouped and not `--exact`), and `on_the_wire` grouped through
    the worker-command proxy too (`wire_args`), `at_once` at a time (see `crashtest_runs`)."""
    grouped = set(runs) if grouped_too is None else grouped_too | grouped_only
    both: dict[str, tuple[list[str], dict[str, str]]] = {}
    for name, (args, extra) in runs.items():
        if name not in grouped_only:
            both[name] = ([*args, "--exact"], extra)
        if name in grouped:
            both[name + GROUPED] = (_outputs_apart(args), extra)
        if name in on_the_wire:
            both[name + WIRE] = (wire_args(_outputs_apart(args, WIRE)), extra)
    results = crashtest_runs(both, env, out, timeout, at_once)
    return BothWays(
        exact={name: results[name] for name in runs if name not in grouped_only},
        grouped={name: results[name + GROUPED] for name in runs if name in grouped},
        wire={name: results[name + WIRE] for name in runs if name in on_the_wire},
    )


WIRE = "~wire"


def wire_args(args: list[str]) -> list[str]:
    """A crash test's arguments with its worker factory run as a worker command, killed on the
    wire through the proxy: crashtest's own Python worker (`python -m temporal_crashtest.worker
    --worker F`), which the tool forks from a fork server as it forks a factory's."""
    args = list(args)
    at = args.index("--worker")
    command = f"{sys.executable} -m temporal_crashtest.worker --worker {args[at + 1]}"
    args[at : at + 2] = ["--worker-cmd", command]
    return args


# Points a kill on the wire does not make, listed as not tested there: an effect inside an
# activity, and the task that schedules a local activity (no command on the wire schedules one).
OFF_THE_WIRE = re.compile(r"^effect:|^in-task:")


@dataclass(frozen=True)
class WireRow:
    """One shape on the wire against the interceptor: the points each made and their verdicts."""

    name: str
    in_process: dict[str, bool]
    on_the_wire: dict[str, bool]
    codes: tuple[int, int]

    @property
    def common(self) -> set[str]:
        return self.in_process.keys() & self.on_the_wire.keys()

    @property
    def differ(self) -> set[str]:
        return {p for p in self.common if self.in_process[p] != self.on_the_wire[p]}

    def line(self) -> str:
        failing = sorted(p for p in self.common if not self.in_process[p])
        only = sorted(self.in_process.keys() - self.on_the_wire.keys())
        said = "same" if not self.differ else f"differ at {sorted(self.differ)}"
        return (
            f"| {self.name} | {len(self.common)} | {', '.join(failing) or '-'} | {said} | "
            f"{len(only)} ({', '.join(sorted({p.split(':')[0] for p in only})) or '-'}) |"
        )


OUTPUT_FLAGS = ("--logs", "--junit-xml")  # a crash test's outputs, each named by a path


def _outputs_apart(args: list[str], way: str = GROUPED) -> list[str]:
    """A grouped (or wire) run's arguments: its outputs (OUTPUT_FLAGS) beside the --exact
    run's, named for its way (`-grouped`), not in the same place (they run at once)."""
    args = list(args)
    for flag in OUTPUT_FLAGS:
        if flag in args:
            at = args.index(flag) + 1
            path = Path(args[at])
            args[at] = str(path.with_name(f"{path.stem}-{way.strip('~')}{path.suffix}"))
    return args


def crashtest_both_ways(
    runs: dict[str, tuple[list[str], dict[str, str]]],
    env: dict[str, str],
    out: Path,
    timeout: float = 300,
    at_once: int | None = None,
    grouped_too: set[str] | None = None,
) -> dict[str, CrashtestRun]:
    """`run_both_ways`, whose verdicts must agree (`BothWays.assert_agree`) and which cleared
    some point in a group. Returns the `--exact` runs."""
    both = run_both_ways(runs, env, out, timeout, at_once, grouped_too)
    both.assert_agree()
    both.assert_some_point_cleared_in_a_group()
    return both.exact


def _why(run: CrashtestRun, points: set[str]) -> list[dict[str, Any]]:
    """What a run said of `points`: enough to tell a load's doing from a verdict's; a run that
    wrote no report, its last lines."""
    done, report = run
    if not report:
        return [{"exit": done.returncode, "last lines": done.stderr.splitlines()[-8:]}]
    keep = ("crash_at", "matches", "diff", "error", "waited_on", "fast_forward", "in_flight")
    return [{k: c.get(k) for k in keep} for c in report.get("cells", []) if c["crash_at"] in points]


ONLY_ENDS = "after it the run only ends"


def untested_but_the_end(report: dict[str, Any]) -> list[dict[str, str]]:
    """What a crash test left untested, besides the point after the last boundary of a run that
    only ended there."""
    return [u for u in report["untested"] if not u["why"].startswith(ONLY_ENDS)]


def failing(report: dict[str, Any]) -> set[str]:
    """The crash points of a crashtest report whose final state differs from the reference."""
    return {c["crash_at"] for c in report["cells"] if not c["matches"]}


# A log line of the text format (infra.logs.TEXT_FORMAT) at INFO or WARNING: progress a command
# may print before its error on a slow machine (the starter's "still waiting for ...").
PROGRESS_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING) [\w.]+: ")


def assert_one_line_error(
    done: subprocess.CompletedProcess[str], message: str, prefix: str = "error: "
) -> None:
    """An expected failure: exit 2 and one readable line on stderr, no stack trace. Lines before
    it may only be progress (log lines at INFO or WARNING, which a loaded machine brings out)."""
    *before, _ = done.stderr.strip().splitlines() or [""]
    assert all(PROGRESS_LINE.match(line) for line in before), done.stderr
    assert_ends_in_error(done, message, prefix)


def assert_ends_in_error(
    done: subprocess.CompletedProcess[str], message: str, prefix: str = "error: "
) -> None:
    """An expected failure found after some progress was shown: exit 2, the error on the last
    line, no stack trace."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(prefix) and message in last, done.stderr


def run_journal(
    db_url: str, run_id: str, design: str, crash_at: str | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    """Run `python -m journal run` exactly as a user or the crash lab does."""
    env = child_env(db_url, **extra)
    if crash_at:
        env["CRASH_AT"] = crash_at
    return run_python(["-m", "journal", "run", "--run-id", run_id, "--design", design], env)


def state(db: psycopg.Connection, run_id: str) -> RunState:
    """What the run left in Postgres, read on the test's own (synchronous) connection."""
    row = db.execute(RUN_STATE_SQL, run_state_params(run_id)).fetchone()
    assert row is not None
    return RunState.from_row(run_id, row)


def prepare_database(url: str) -> str:
    """The app's tables in the database at `url` (the product's own async code, in a thread of
    its own: a fixture may run while the tests' event loop does); returns `url`."""

    async def prepare() -> None:
        async with await connect_postgres(url) as conn:
            await ensure_schema(conn)

    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, prepare()).result(timeout=60)
    return url


class WorkerProcess:
    """`python worker.py` in a child process, as a user runs it; its output goes to a log file.
    With `crash_at`, the same worker inside crashtest's worker process, which SIGKILLs itself
    there."""

    def __init__(
        self,
        db_url: str,
        address: str,
        queue: str,
        log_dir: Path,
        crash_at: str | None = None,
        **env: str,
    ) -> None:
        self.log_path = log_dir / f"worker-{uuid.uuid4().hex[:6]}.log"
        self._log = self.log_path.open("w")
        args = crashing_worker(queue, crash_at) if crash_at else ["worker.py"]
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=ROOT,
            env=child_env(db_url, **{"TEMPORAL_ADDRESS": address, "TASK_QUEUE": queue, **env}),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> int:
        """SIGTERM, as a supervisor stops a worker; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


async def crash_then_resume(
    client: Client,
    workers: Callable[..., WorkerProcess],
    crash_at: str,
    key_strategy: str,
    **resume_env: str,
) -> tuple[str, GroceryResult, WorkerProcess]:
    """Start a run on a worker that SIGKILLs itself at `crash_at`; a fresh worker (with
    `resume_env` added to its environment) finishes it. Returns the workflow id, its result and
    the worker that finished it."""
    queue = new_run_id("q")
    workflow_id = new_run_id(f"crash-{key_strategy}")
    doomed = workers(queue, crash_at=crash_at, KEY_STRATEGY=key_strategy)
    handle = await client.start_workflow(
        GroceryAgentWorkflow.run,
        GroceryRequest(household="household-1", week=EXAMPLE_WEEK),
        id=workflow_id,
        task_queue=queue,
    )
    code = await asyncio.to_thread(doomed.wait, RESULT_TIMEOUT_S)
    assert code == -signal.SIGKILL, doomed.log()
    assert "CRASH after-" in doomed.log()  # crashtest's interceptor said where, then SIGKILL

    resumed = workers(queue, KEY_STRATEGY=key_strategy, **resume_env)
    result = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    return workflow_id, result, resumed


def starter(db_url: str, address: str, queue: str, *args: str, **env: str) -> dict[str, object]:
    """`starter.py --json` for a run expected to complete: its outcome."""
    done = run_python(
        ["starter.py", "--task-queue", queue, "--json", *args],
        child_env(db_url, TEMPORAL_ADDRESS=address, **env),
        RESULT_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def failing_starter(
    db_url: str, address: str, queue: str, household: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`starter.py` for a run expected to fail, its output for `assert_one_line_error`."""
    return await asyncio.to_thread(
        run_python,
        ["starter.py", "--task-queue", queue, "--household", household],
        child_env(db_url, TEMPORAL_ADDRESS=address, **env),
        RESULT_TIMEOUT_S,
    )


async def attempts(client: Client, workflow_id: str) -> list[int]:
    """The attempt number of every ActivityTaskStarted event in the run's history."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]


PAYMENTS_INPUT = '{"customer": "acme", "invoices": ["inv-1", "inv-2", "inv-3"]}'


def payments(factory: str) -> list[str]:
    """crashtest's arguments for the payments example, with the worker factory named."""
    return [
        "--worker", f"examples.payments.worker:{factory}",
        "--workflow", "examples.payments.workflow:PaymentsWorkflow",
        "--input", PAYMENTS_INPUT,
        "--observe", "examples.payments.observe:payments_of", "--jobs", "4",
    ]  # fmt: skip


def scrape(port: int, host: str = "127.0.0.1") -> str:
    """A worker's Prometheus metrics page (METRICS_PORT, on METRICS_HOST `host`)."""
    where = f"[{host}]" if ":" in host else host
    with urllib.request.urlopen(f"http://{where}:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())
