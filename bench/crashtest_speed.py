"""How long a whole crash test takes, grouped (the default: several points crashed in one run)
against `--exact` (a run per point), and how it grows with the number of boundaries (a workflow
of N charges in a row, `examples/shapes/sequence.py`): points, groups, runs, wall time, seconds
per point and the Temporal server's CPU.

Each sample is one whole `python -m temporal_crashtest run` (a fresh process: start-up, the
reference run and every cell), timed from outside, on a private tuned dev server (in memory)
that this bench starts, so that its CPU is the crash tests' alone; grouped and exact samples
alternate, so that a noisy neighbour slows both alike. Grouped and exact must give the same
verdicts, point by point, in every sample.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporal_crashtest import dev_server_command

from crashlab.lab import grocery_crashtest_args
from infra.config import PROJECT_ROOT
from infra.processes import free_port, wait_until_listening
from infra.reporting import p99, render
from infra.temporal_server import temporal_binary

GROCERY = grocery_crashtest_args("bench")
DEPLOY_TO = ["--deploy-to", "examples.shapes.sequence:keyed_worker"]  # the same code, deployed
EFFECTS_WEIGHED_UP_TO = 50  # boundaries: up to this, a sequence is also run without effect points
MODES = {
    "grouped": [],
    "exact": ["--exact"],
    "deploy": DEPLOY_TO,  # every point a run of its own, after the replay pass
    "replay": [*DEPLOY_TO, "--points", "after-effect:1"],  # the replay pass, and one cell
    # Grouped, without the points inside activities (after each effect): the default set before
    # them, to weigh what they cost beside the default's time in the same bench run.
    "boundaries": ["--points", "after-effect,after-checkpoint"],
    # The same worker run as a command (`--worker-cmd`), killed on the wire through crashtest's
    # proxy, at the points a kill on the wire makes: against "boundaries", what the wire costs.
    "command": ["--points", "after-effect,after-checkpoint"],
}
WIRED = "command"


def as_command(args: list[str]) -> list[str]:
    """A crash test's arguments with its Python worker factory run as a worker command (any
    SDK's way: `python -m temporal_crashtest.worker` reads the address, namespace and task queue
    from the environment) and its workflow named by its type."""
    out = list(args)
    factory = out.pop(out.index("--worker") + 1)
    out.remove("--worker")
    at = out.index("--workflow") + 1
    out[at] = out[at].rpartition(":")[2]
    command = f"{sys.executable} -m temporal_crashtest.worker --worker {factory}"
    return ["--worker-cmd", command, *out]


def sequence(charges: int, worker: str = "keyed_worker") -> list[str]:
    return [
        "--worker", f"examples.shapes.sequence:{worker}",
        "--workflow", "examples.shapes.sequence:ChargeEach",
        "--input", str(charges),
        "--observe", "examples.shapes.ledger:effects_of",
    ]  # fmt: skip


def reminder(days: int) -> list[str]:
    """A sign-up's reminder after `days` of sleep (0: none), keyed: what a long sleep costs."""
    return [
        "--worker", "examples.shapes.waits:keyed_worker",
        "--workflow", "examples.shapes.waits:ReminderAfter",
        "--input", json.dumps({"user": "ada", "days": days}),
        "--observe", "examples.shapes.ledger:effects_of",
    ]  # fmt: skip


SLEEPS, AWAKE = "a reminder after 30 days", "a reminder at once"


class Timing(BaseModel):
    """One crash test, `n` whole runs of it in one mode."""

    target: str
    mode: str  # grouped | exact
    boundaries: int
    points: int
    failing: int  # points that differ from the reference (the same in both modes)
    groups: int  # the groups the points began in (0: exact)
    runs: int  # the runs the cells took (median)
    median_s: float
    p99_s: float
    server_cpu_s: float  # the dev server's CPU during the test (median)
    tool_requests: int  # requests the tool made of the server (median)
    worker_requests: int  # requests its workers made: polls, completions, heartbeats (median)
    n: int
    replay_ms: float | None = None  # a deploy test's replay pass: every replay's time (median)
    replays: int = 0  # ... the cuts it replayed (the others follow from them)

    @property
    def s_per_point(self) -> float:
        return self.median_s / self.points


@dataclass
class _Sample:
    seconds: float
    server_cpu_s: float
    requests: Counter[str]
    report: dict[str, Any]

    @property
    def tool_requests(self) -> int:
        return sum(n for op, n in self.requests.items() if op in TOOL_REQUESTS)

    @property
    def worker_requests(self) -> int:
        return sum(n for op, n in self.requests.items() if op not in TOOL_REQUESTS)

    @property
    def replay_ms(self) -> float | None:
        timed = [r["ms"] for r in self.report.get("replay", []) if r["ms"] is not None]
        return sum(timed) if timed else None

    @property
    def verdicts(self) -> list[tuple[str, bool]]:
        return [(c["crash_at"], c["matches"]) for c in self.report["cells"]]


class CrashtestError(RuntimeError):
    pass


def _cpu_s(pid: int) -> float:
    """A process's CPU time so far (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class BenchServer:
    """The bench's own dev server: where it listens, its pid, its metrics endpoint."""

    address: str
    pid: int
    metrics_url: str


# The requests a crash test itself makes of the server (the rest are its workers': polls,
# completions, heartbeats, and the workflow starts).
TOOL_REQUESTS = frozenset({
    "DescribeWorkflowExecution", "GetWorkflowExecutionHistory", "ResetStickyTaskQueue",
    "RespondActivityTaskFailed", "RespondActivityTaskFailedById", "DescribeTaskQueue",
    "TerminateWorkflowExecution", "ResetWorkflowExecution",
})  # fmt: skip
_REQUESTS = re.compile(r"^service_requests\{([^}]*)\} ([0-9.e+]+)$", re.MULTILINE)
_OPERATION = re.compile(r'operation="([^"]+)"')


def requests_by_operation(metrics_url: str) -> Counter[str]:
    """The frontend's requests so far, by operation (the server's `service_requests`)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as answer:
        text = answer.read().decode()
    counts: Counter[str] = Counter()
    for labels, value in _REQUESTS.findall(text):
        if 'service_name="frontend"' in labels and (op := _OPERATION.search(labels)):
            counts[op.group(1)] += int(float(value))
    return counts


@contextmanager
def private_dev_server(log: Path) -> Iterator[BenchServer]:
    """A tuned dev server (in memory) for the bench alone, with its metrics endpoint."""
    port, metrics = free_port(), free_port()
    command = dev_server_command(temporal_binary(), port=port, ui_port=None)
    command += ["--metrics-port", str(metrics)]
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_listening(proc, "the bench's dev server", "127.0.0.1", port, log)
        yield BenchServer(f"127.0.0.1:{port}", proc.pid, f"http://127.0.0.1:{metrics}/metrics")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _one(
    args: list[str], env: dict[str, str], json_path: Path, server: BenchServer
) -> _Sample:
    cpu, requests = _cpu_s(server.pid), requests_by_operation(server.metrics_url)
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "temporal_crashtest",
        "run",
        *args,
        "--json",
        str(json_path),
        cwd=PROJECT_ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    seconds = time.perf_counter() - started
    report = _report(json_path)
    if proc.returncode not in (0, 1) or report is None:
        last = err.decode(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise CrashtestError(f"crashtest exited {proc.returncode}: {last[0]}")
    made = requests_by_operation(server.metrics_url)
    made.subtract(requests)
    return _Sample(seconds, _cpu_s(server.pid) - cpu, +made, report)


def _report(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def _timing(target: str, mode: str, samples: list[_Sample]) -> Timing:
    seconds = [s.seconds for s in samples]
    report = samples[0].report
    return Timing(
        target=target,
        mode=mode,
        boundaries=len(report["activities"]),
        points=len(report["cells"]),
        failing=sum(not ok for _, ok in samples[0].verdicts),
        groups=report.get("groups", 0),
        runs=round(statistics.median(s.report.get("runs", 0) for s in samples)),
        median_s=round(statistics.median(seconds), 2),
        p99_s=round(p99(seconds), 2),
        server_cpu_s=round(statistics.median(s.server_cpu_s for s in samples), 1),
        tool_requests=round(statistics.median(s.tool_requests for s in samples)),
        worker_requests=round(statistics.median(s.worker_requests for s in samples)),
        n=len(samples),
        replay_ms=_median_or_none([s.replay_ms for s in samples]),
        replays=sum(r["ms"] is not None for r in report.get("replay", [])),
    )


def _median_or_none(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 1) if known else None


async def measure(
    target: str,
    args: list[str],
    env: dict[str, str],
    runs: int,
    out: Path,
    server: BenchServer,
    progress: Callable[[str], None],
    modes: tuple[str, ...] = ("grouped", "exact"),
) -> list[Timing]:
    """`runs` whole crash tests in each mode, alternating. The verdicts must agree, point by
    point, in every run of every mode."""
    samples: dict[str, list[_Sample]] = {mode: [] for mode in modes}
    for i in range(runs):
        for mode in modes:
            progress(f"crashtest {target}: {mode} run {i + 1}/{runs}")
            path = out / f"{target.replace(' ', '-')}-{mode}-{i}.json"
            given = as_command(args) if mode == WIRED else args
            samples[mode].append(await _one([*given, *MODES[mode]], env, path, server))
    some = ("replay", "boundaries", WIRED)  # one point only; the points but the effect ones
    verdicts = {
        tuple(sorted(s.verdicts))
        for mode, group in samples.items()
        for s in group
        if mode not in some
    }
    if len(verdicts) != 1:
        raise CrashtestError(f"crashtest {target}: the verdicts differ between runs: {verdicts}")
    (every,) = verdicts
    for mode in ("boundaries", WIRED):
        if any(not set(s.verdicts) <= set(every) for s in samples.get(mode, [])):
            raise CrashtestError(f"crashtest {target}: {mode}: the verdicts differ")
    return [_timing(target, mode, group) for mode, group in samples.items()]


def table(timings: list[Timing]) -> str:
    head = [
        "crash test",
        "mode",
        "bounds",
        "points",
        "failing",
        "groups",
        "runs",
        "median s",
        "p99 s",
        "n",
        "s/point",
        "server CPU s",
        "requests: tool / workers",
        "replay pass ms (cuts replayed)",
    ]
    rows = [_row(t) for t in timings]
    return render(head, rows)


def _row(t: Timing) -> list[str]:
    counts = [t.boundaries, t.points, t.failing, t.groups, t.runs]
    times = [f"{t.median_s:.2f}", f"{t.p99_s:.2f}", str(t.n), f"{t.s_per_point:.3f}"]
    requests = f"{t.tool_requests} / {t.worker_requests}"
    replay = "" if t.replay_ms is None else f"{t.replay_ms:.0f} ({t.replays})"
    return [
        t.target,
        t.mode,
        *map(str, counts),
        *times,
        f"{t.server_cpu_s:.1f}",
        requests,
        replay,
    ]


def ratios(timings: list[Timing]) -> list[str]:
    """grouped / exact for every target measured both ways (wall and server CPU); grouped
    against grouped without the effect points; a deploy test against both; the replay pass per
    boundary."""
    by = {(t.target, t.mode): t for t in timings}
    out = []
    for t in timings:
        if t.replay_ms is not None:
            out.append(
                f"{t.target}: replay pass {t.replay_ms:.0f} ms for {t.boundaries} boundaries "
                f"({t.replay_ms / t.boundaries:.1f} ms per boundary, {t.replays} replayed)"
            )
        if t.mode == "deploy":
            plain = [by[(t.target, m)] for m in ("grouped", "exact") if (t.target, m) in by]
            out.append(
                f"{t.target}: deploy test / plain = "
                + ", ".join(f"{t.median_s / p.median_s:.2f}x {p.mode}" for p in plain)
            )
        if t.target == SLEEPS and (AWAKE, t.mode) in by:
            awake = by[(AWAKE, t.mode)]
            out.append(
                f"{SLEEPS}: 30 days' sleep / none = {t.median_s / awake.median_s:.2f}x wall "
                f"({t.points} points each; the sleep skipped: Temporal's time skipping)"
            )
        bare = by.get((t.target, "boundaries"))
        if t.mode == WIRED and bare is not None:
            out.append(
                f"{t.target}: a worker command through the proxy / in process = "
                f"{t.median_s / bare.median_s:.2f}x wall ({t.points} points, the same verdicts)"
            )
        if t.mode == "grouped" and bare is not None:
            out.append(
                f"{t.target}: every point / without the effect points = "
                f"{t.median_s / bare.median_s:.2f}x wall ({t.points} / {bare.points} points)"
            )
        exact = by.get((t.target, "exact"))
        if t.mode == "grouped" and exact is not None:
            cpu = t.server_cpu_s / exact.server_cpu_s if exact.server_cpu_s else float("nan")
            out.append(
                f"{t.target}: grouped / --exact = {t.median_s / exact.median_s:.2f}x wall, "
                f"{cpu:.2f}x server CPU"
            )
    return out
