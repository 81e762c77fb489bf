"""`make demo`: kill a worker just after it placed the order, and watch the run heal.

Each stage is narrated in one line as it happens. Exits non-zero if the crashed run's final state
differs from a run that never crashed.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from temporal_crashtest import Child, Processes
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import Client

from agent.data import EXAMPLE_WEEK
from agent.outcome import read_run_state
from agent.steps import PLACE_ORDER
from crashlab.cells import RESET, select_cells
from crashlab.engines import all_cells
from crashlab.lab import crashing_worker
from crashlab.matrix import run_matrix
from infra.config import PROJECT_ROOT, data_dir
from infra.db import connect_postgres, ensure_database_url, ensure_schema
from infra.errors import AgentError
from infra.temporal_client import connect_temporal
from infra.temporal_server import ensure_temporal_address, is_listening, ui_url
from journal.crash_points import without_crash_at

STAGES = 9
CRASH_AT = f"after-effect:{PLACE_ORDER.number}"  # the order is placed, not yet recorded
WORKER_CRASH_AT = f"after-effect:{PLACE_ORDER.name}"  # the same, as crashtest's worker names it


def say(stage: int, text: str) -> None:
    print(f"[{stage}/{STAGES}] {text}", flush=True)


async def pending_order(client: Client, workflow_id: str) -> PendingActivityInfo | None:
    """What Temporal's server knows right now of the order activity, if it is pending."""
    desc = await client.get_workflow_handle(workflow_id).describe()
    for pending in desc.raw_description.pending_activities:
        if pending.activity_type.name == PLACE_ORDER.name:
            return pending
    return None


async def wait_for_retry(
    client: Client, workflow_id: str, limit_s: float = 30
) -> PendingActivityInfo | None:
    """Poll until the order activity is pending on attempt 2 or more (None: it finished first)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        pending = await pending_order(client, workflow_id)
        if pending is not None and pending.attempt >= 2:
            return pending
        if pending is None:
            return None
        await asyncio.sleep(0.05)
    return None


async def order_attempts(client: Client, workflow_id: str) -> list[tuple[int, str]]:
    """(attempt, worker identity) of every start of the order activity, from the history."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    order_event_ids = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == PLACE_ORDER.name
    }
    return [
        (
            e.activity_task_started_event_attributes.attempt,
            e.activity_task_started_event_attributes.identity,
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in order_event_ids
    ]


@dataclass
class Demo:
    """One narrated crash: its names, its servers and its processes, stage by stage."""

    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    def __post_init__(self) -> None:
        self.household = f"demo-{self.tag}"
        self.workflow_id = f"grocery-{self.household}-{EXAMPLE_WEEK}"
        self.queue = f"demo-{self.tag}"

    async def servers(self) -> Processes:
        """Stages 1-2: Postgres and the Temporal dev server, found or started; the processes'
        supervisor."""
        self.db_url = ensure_database_url()
        say(
            1, f"Postgres ready (embedded under .data/pg unless DATABASE_URL is set): {self.db_url}"
        )
        was_running = is_listening()
        address = ensure_temporal_address()
        state_word = "already running" if was_running else "started"
        say(2, f"Temporal dev server {state_word} at {address}; web UI {ui_url()}")
        async with await connect_postgres(self.db_url) as conn:
            await ensure_schema(conn)
        self.client = await connect_temporal(address)
        env = dict(
            without_crash_at(os.environ),
            DATABASE_URL=self.db_url,
            TEMPORAL_ADDRESS=address,
            TASK_QUEUE=self.queue,
        )
        self.procs = Processes(data_dir() / "crashlab" / f"demo-{self.tag}", env, cwd=PROJECT_ROOT)
        return self.procs

    async def crash(self) -> Child:
        """Stages 3-5: worker A places the order and is killed before Temporal hears of it; the
        starter waits on the run. Returns the starter."""
        procs = self.procs
        doomed = await procs.start("worker-a", crashing_worker(self.queue, WORKER_CRASH_AT))
        say(
            3,
            f"worker A started (pid {doomed.pid}); it will SIGKILL itself just after placing "
            "the order, before Temporal hears the activity finished "
            f"(--crash-at {WORKER_CRASH_AT})",
        )
        starter = await procs.start(
            "starter",
            ["starter.py", "--household", self.household, "--week", EXAMPLE_WEEK, "--json"],
        )
        say(4, f"starter.py started run {self.workflow_id}")
        code = await procs.wait(doomed, 60)
        if code != -signal.SIGKILL:
            raise AgentError(f"worker A exited with {code}, not by SIGKILL; see {procs.log_dir}")
        async with await connect_postgres(self.db_url) as conn:
            mid = await read_run_state(conn, self.workflow_id)
        order_id = mid.orders[0].id if mid.orders else None
        seen = await pending_order(self.client, self.workflow_id)
        view = "not pending"
        if seen is not None:
            status = PendingActivityState.Name(seen.state).removeprefix("PENDING_ACTIVITY_STATE_")
            view = f"attempt {seen.attempt}, {status.lower()}"
        say(
            5,
            f"worker A killed by SIGKILL. Postgres already holds order #{order_id} "
            f"({mid.counts_text()}); Temporal's view of place_order: {view}",
        )
        return starter

    async def resume(self, starter: Child) -> dict[str, Any]:
        """Stages 6-8: worker B takes over; Temporal retries the order with the same key and the
        store returns the first order. Returns the starter's outcome."""
        procs, client, workflow_id = self.procs, self.client, self.workflow_id
        key = f"{workflow_id}:{PLACE_ORDER.number}"
        rescuer = await procs.start("worker-b", ["worker.py"])
        say(6, f"worker B started (pid {rescuer.pid}); the run's next tasks go to it")
        retry = await wait_for_retry(client, workflow_id)
        if retry:
            why = retry.last_failure.message or "timeout"
            say(
                7,
                f"Temporal retries place_order (attempt 1 failed: {why}): "
                f"attempt {retry.attempt}, with the same key {key}",
            )
        code = await procs.wait(starter, 90)
        if code != 0:
            raise AgentError(f"starter.py failed: {procs.last_line('starter')}")
        outcome: dict[str, Any] = json.loads(procs.last_line("starter"))
        starts = await order_attempts(client, workflow_id)
        history_text = ", ".join(f"attempt {a} started by {who}" for a, who in starts)
        if not retry:
            say(7, f"Temporal retried place_order with the same key {key}")
        say(
            8,
            f"run completed; the history records place_order {history_text} (worker B); "
            f"the store returned order #{outcome['order_id']} instead of a second row",
        )
        return outcome

    async def compare(self, outcome: dict[str, Any]) -> bool:
        """A run that never crashes, same household; whether the two final states are the same."""
        reference_id = f"{self.workflow_id}-no-crash"
        ref = await self.procs.start(
            "reference",
            [
                "starter.py",
                "--household",
                self.household,
                "--week",
                EXAMPLE_WEEK,
                "--workflow-id",
                reference_id,
                "--json",
            ],
        )
        if await self.procs.wait(ref, 60) != 0:
            raise AgentError(f"the no-crash run failed; see {self.procs.log_dir}")
        async with await connect_postgres(self.db_url) as conn:
            crashed = await read_run_state(conn, self.workflow_id)
            clean = await read_run_state(conn, reference_id)
        same = crashed.comparable() == clean.comparable()
        print()
        print(f"{'':24}{'model calls':>12}{'orders':>8}{'emails':>8}")
        for name, run in (("crashed and resumed", crashed), ("never crashed", clean)):
            calls, orders, emails = run.counts
            print(f"{name:24}{calls:>12}{orders:>8}{emails:>8}")
        print(
            f"same final state (items, email naming its order, summary): {'yes' if same else 'NO'}"
        )
        print(f"summary: {outcome['summary']}")
        print(f"history: {outcome['ui']}")
        print()
        return same


async def compact_matrix() -> bool:
    """Stage 9: the crash point of the demo for every design, and a reset; whether every cell
    showed its design's expected outcome."""
    say(
        9,
        f"compact crash matrix: {CRASH_AT} (order placed, not recorded) for every design, "
        "and a reset to before the order for Temporal's key strategies",
    )
    cells = select_cells(all_cells("all"), None, [CRASH_AT, RESET])
    report = await run_matrix(cells, jobs=len(cells), progress=lambda *_: None)
    print(report.table())
    print(report.legend())
    print("The full matrix: python -m crashlab matrix --engine all")
    return not report.unexpected


async def demo() -> int:
    run = Demo()
    procs = await run.servers()
    try:
        outcome = await run.resume(await run.crash())
        same = await run.compare(outcome)
    finally:
        procs.kill_all()
    as_expected = await compact_matrix()
    if not same:
        print(
            "FAILED: the crashed run's final state differs from the no-crash run", file=sys.stderr
        )
        return 1
    if not as_expected:
        print("FAILED: a matrix cell did not show its design's expected outcome", file=sys.stderr)
        return 1
    return 0
