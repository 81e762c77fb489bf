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

from temporal_crashtest.processes import Processes
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import Client

from agent.outcome import read_run_state
from agent.steps import PLACE_ORDER
from crashlab.cells import RESET, all_cells, select_cells
from crashlab.lab import crashing_worker
from crashlab.matrix import run_matrix
from infra.config import PROJECT_ROOT, data_dir
from infra.db import connect, database_url, ensure_schema
from infra.errors import AgentError
from infra.temporal_client import connect_temporal
from infra.temporal_server import is_listening, temporal_address, ui_url
from journal.crash_points import without_crash_at

STAGES = 9
CRASH_AT = f"after-effect:{PLACE_ORDER.number}"  # the order is placed, not yet recorded
WEEK = "2026-W49"


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


async def demo() -> int:
    tag = uuid.uuid4().hex[:6]
    household = f"demo-{tag}"
    workflow_id = f"grocery-{household}-{WEEK}"
    queue = f"demo-{tag}"

    db_url = database_url()
    say(1, f"Postgres ready (embedded under .data/pg unless DATABASE_URL is set): {db_url}")
    was_running = is_listening()
    address = temporal_address()
    state_word = "already running" if was_running else "started"
    say(2, f"Temporal dev server {state_word} at {address}; web UI {ui_url()}")
    async with await connect(db_url) as conn:
        await ensure_schema(conn)
    client = await connect_temporal(address)

    env = dict(
        without_crash_at(os.environ),
        DATABASE_URL=db_url,
        TEMPORAL_ADDRESS=address,
        TASK_QUEUE=queue,
    )
    procs = Processes(data_dir() / "crashlab" / f"demo-{tag}", env, cwd=PROJECT_ROOT)
    try:
        doomed = await procs.start("worker-a", crashing_worker(queue, CRASH_AT))
        say(
            3,
            f"worker A started (pid {doomed.pid}); it will SIGKILL itself just after placing "
            f"the order, before Temporal hears the activity finished (--crash-at {CRASH_AT})",
        )
        starter = await procs.start(
            "starter", ["starter.py", "--household", household, "--week", WEEK, "--json"]
        )
        say(4, f"starter.py started run {workflow_id}")

        code = await procs.wait(doomed, 60)
        if code != -signal.SIGKILL:
            raise AgentError(f"worker A exited with {code}, not by SIGKILL; see {procs.log_dir}")
        async with await connect(db_url) as conn:
            mid = await read_run_state(conn, workflow_id)
        order_id = mid.orders[0].id if mid.orders else None
        seen = await pending_order(client, workflow_id)
        view = "not pending"
        if seen is not None:
            status = PendingActivityState.Name(seen.state).removeprefix("PENDING_ACTIVITY_STATE_")
            view = f"attempt {seen.attempt}, {status.lower()}"
        say(
            5,
            f"worker A killed by SIGKILL. Postgres already holds order #{order_id} "
            f"({mid.counts_text()}); Temporal's view of place_order: {view}",
        )

        rescuer = await procs.start("worker-b", ["worker.py"])
        say(6, f"worker B started (pid {rescuer.pid}); the run's next tasks go to it")
        retry = await wait_for_retry(client, workflow_id)
        if retry:
            why = retry.last_failure.message or "timeout"
            say(
                7,
                f"Temporal retries place_order (attempt 1 failed: {why}): "
                f"attempt {retry.attempt}, with the same key {workflow_id}:{PLACE_ORDER.number}",
            )
        code = await procs.wait(starter, 90)
        if code != 0:
            raise AgentError(f"starter.py failed: {procs.last_line('starter')}")
        outcome = json.loads(procs.last_line("starter"))
        starts = await order_attempts(client, workflow_id)
        history_text = ", ".join(f"attempt {a} started by {who}" for a, who in starts)
        if not retry:
            say(
                7,
                f"Temporal retried place_order with the same key {workflow_id}:"
                f"{PLACE_ORDER.number}",
            )
        say(
            8,
            f"run completed; the history records place_order {history_text} (worker B); "
            f"the store returned order #{outcome['order_id']} instead of a second row",
        )

        # A run that never crashes, same household, for the comparison.
        reference_id = f"{workflow_id}-no-crash"
        ref = await procs.start(
            "reference",
            [
                "starter.py",
                "--household",
                household,
                "--week",
                WEEK,
                "--workflow-id",
                reference_id,
                "--json",
            ],
        )
        if await procs.wait(ref, 60) != 0:
            raise AgentError(f"the no-crash run failed; see {procs.log_dir}")
        async with await connect(db_url) as conn:
            crashed = await read_run_state(conn, workflow_id)
            clean = await read_run_state(conn, reference_id)
        same = crashed.final_state() == clean.final_state()
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
    finally:
        procs.kill_all()

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
    if not same:
        print(
            "FAILED: the crashed run's final state differs from the no-crash run", file=sys.stderr
        )
        return 1
    if report.unexpected:
        print("FAILED: a matrix cell did not show its design's expected outcome", file=sys.stderr)
        return 1
    return 0
