"""`python starter.py`: start one grocery run, wait for it, print the outcome.

The workflow id is a business id, `grocery-{household}-{week}`: one run per household per week.
Starting it again does not order again; it reports the run that already exists.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import re
import time
from typing import Any

import psycopg
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from agent.data import HOUSEHOLD_PATTERN, WEEK_PATTERN, GroceryRequest, GroceryResult
from agent.grocer import Grocer, configured_grocer
from agent.llm import forget_recorded_answers
from agent.outcome import read_run_state
from infra.blocked import WHAT_TO_DO, why_blocked
from infra.cli import ArgumentParser, run_main, visible
from infra.config import task_queue
from infra.db import connect_postgres, ensure_database_url, ensure_schema
from infra.errors import AgentError, ConfigError, DatabaseUnavailable, RunBlocked, first_line
from infra.logs import LogFormat, log_format
from infra.temporal_client import connect_temporal
from infra.temporal_server import ui_url
from workflows.grocery import GroceryAgentWorkflow

log = logging.getLogger("starter")
RECONNECT_S = 30  # how long the outcome waits for a restarting Postgres
ASK_TIMEOUT_S = 3.0  # how long "what is the run waiting on?" may take
WAIT_LOOK_S = 5.0  # while a result is slow to come, look this often whether a deploy blocked it

_NAME = re.compile(HOUSEHOLD_PATTERN)
_WEEK = re.compile(WEEK_PATTERN)


def this_week() -> str:
    year, week, _ = datetime.date.today().isocalendar()
    return f"{year}-W{week:02d}"


def workflow_id_for(household: str, week: str) -> str:
    return f"grocery-{household}-{week}"


def parse_args() -> argparse.Namespace:
    parser = ArgumentParser(prog="python starter.py", description=__doc__.splitlines()[0])
    parser.add_argument("--household", default="household-1")
    parser.add_argument("--week", default=None, help="ISO week like 2026-W49 (default: this week)")
    parser.add_argument("--workflow-id", default=None, help="override the business id")
    parser.add_argument("--task-queue", default=None, help="default: TASK_QUEUE or grocery-agent")
    parser.add_argument("--json", action="store_true", help="print the outcome as one JSON object")
    parser.add_argument(
        "--again",
        action="store_true",
        help="run a week whose run failed again: its recorded model answers are set aside, so "
        "the model is asked again; an order or email the failed run made is found (by its key, "
        "or at the grocer by its reference) and not made again, and the output says so",
    )
    args = parser.parse_args()
    args.week = args.week or this_week()
    if not _NAME.match(args.household):
        parser.error(f"--household {args.household!r}: use letters, digits, '-', '_' or '.'")
    if not _WEEK.match(args.week):
        parser.error(f"--week {args.week!r}: expected an ISO week like 2026-W49")
    if args.workflow_id is not None and not _NAME.match(args.workflow_id):
        parser.error(f"--workflow-id {args.workflow_id!r}: use letters, digits, '-', '_' or '.'")
    return args


async def wait_telling_why(handle: WorkflowHandle[Any, GroceryResult], queue: str) -> GroceryResult:
    """Wait for the result; if it is slow to come, say once what it may be waiting for: a step
    being retried (and its last failure), no worker, or no Temporal (the wait goes on through a
    Temporal outage: the server keeps the run). A run a deploy blocked (its code no longer
    replays) is an error, with why and what to do, instead of a wait that never ends."""
    result = asyncio.ensure_future(result_through_outages(handle))
    said = False
    while not (await asyncio.wait({result}, timeout=WAIT_LOOK_S))[0]:
        if not said:
            log.warning(
                "still waiting for %s: %s",
                handle.id,
                await waiting_on(handle, queue),
                extra={"workflow_id": handle.id},
            )
            said = True
        blocked = await blocked_by_a_deploy(handle)
        if blocked is not None:
            result.cancel()
            raise RunBlocked(f"{handle.id} is blocked: {blocked}; {WHAT_TO_DO}")
    return await result


async def blocked_by_a_deploy(handle: WorkflowHandle[Any, GroceryResult]) -> str | None:
    """The nondeterminism error the run's workflow task fails with, if a deploy blocked it (None
    too while Temporal does not answer: the wait goes on). The history is read only once the
    run's workflow task has failed."""
    try:
        described = await asyncio.wait_for(handle.describe(), ASK_TIMEOUT_S)
        if described.raw_description.pending_workflow_task.attempt < 2:
            return None
        return why_blocked(await asyncio.wait_for(handle.fetch_history(), ASK_TIMEOUT_S))
    except (RPCError, TimeoutError):
        return None


async def result_through_outages(handle: WorkflowHandle[Any, GroceryResult]) -> GroceryResult:
    """The run's result, asked again while Temporal does not answer (a restart, an outage)."""
    said = False
    while True:
        try:
            return await handle.result()
        except RPCError as err:
            if err.status not in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
                raise
            if not said:
                log.warning(
                    "Temporal does not answer (%s): waiting for it; the run goes on once it is "
                    "back",
                    visible(first_line(err)),
                    extra={"workflow_id": handle.id},
                )
                said = True
            await asyncio.sleep(ASK_TIMEOUT_S)


async def waiting_on(handle: WorkflowHandle[Any, GroceryResult], queue: str) -> str:
    try:  # the SDK's client retries an unanswered call for long: a short deadline says it now
        description = await asyncio.wait_for(handle.describe(), ASK_TIMEOUT_S)
    except (RPCError, TimeoutError) as err:
        why = visible(first_line(err)) if isinstance(err, RPCError) else f"in {ASK_TIMEOUT_S:g} s"
        return (
            f"Temporal does not answer ({why}): the run is kept by the server and goes on once "
            "it is back; waiting"
        )
    for pending in description.raw_description.pending_activities:
        if pending.attempt > 1 and pending.last_failure.message:
            return (
                f"step {pending.activity_type.name} is being retried (attempt "
                f"{pending.attempt}; last: {pending.last_failure.message})"
            )
    return f"is a worker running on task queue {queue}? (python worker.py)"


def reason(err: BaseException) -> str:
    """The innermost cause's message: a failed run's `Activity task failed` wraps the step's own
    error, which says what happened."""
    while (inner := getattr(err, "cause", None)) is not None:
        err = inner
    return getattr(err, "message", None) or str(err)


FAILED = {
    WorkflowExecutionStatus.FAILED,
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT,
    WorkflowExecutionStatus.CANCELED,
}


async def prepare_again(
    client: Client, conn: psycopg.AsyncConnection, workflow_id: str, grocer: Grocer | None
) -> list[int]:
    """Check that the week's last run failed, and set its recorded model answers aside. Returns
    the orders the week already has (in our table, or at the grocer under its reference): the
    new run finds its order there and places none."""
    try:
        status = (await client.get_workflow_handle(workflow_id).describe()).status
    except RPCError:
        raise AgentError(f"{workflow_id} has not run: --again runs a failed week again") from None
    if status not in FAILED:
        name = status.name.lower() if status else "unknown"
        raise AgentError(f"{workflow_id} is {name}: --again runs only a failed week again")
    await forget_recorded_answers(conn, workflow_id)
    return [order.id for order in (await read_run_state(conn, workflow_id, grocer)).orders]


async def start_or_find(
    client: Client, request: GroceryRequest, workflow_id: str, queue: str, again: bool = False
) -> tuple[GroceryResult, str, bool]:
    """Start the run, or find the one that already has this id. Returns (result, Temporal's run
    id, new?).

    The workflow id is the business id: a second start for the same week is refused by the
    reuse policy, so it finds the first run instead of ordering again; `again` allows a new run
    only when the last one failed (ALLOW_DUPLICATE_FAILED_ONLY)."""
    policy = (
        WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
        if again
        else WorkflowIDReusePolicy.REJECT_DUPLICATE
    )
    try:
        handle = await client.start_workflow(
            GroceryAgentWorkflow.run,
            request,
            id=workflow_id,
            task_queue=queue,
            id_reuse_policy=policy,
        )
        started = True
        ids = {"workflow_id": workflow_id, "workflow_run_id": handle.result_run_id}
        log.info("started %s on task queue %s", workflow_id, queue, extra=ids)
    except WorkflowAlreadyStartedError:
        handle = client.get_workflow_handle_for(GroceryAgentWorkflow.run, workflow_id)
        started = False
    try:
        result = await wait_telling_why(handle, queue)
    except WorkflowFailureError as err:
        hint = "" if again else "; run it again with --again"
        raise AgentError(f"run {workflow_id} failed: {reason(err)}{hint}") from None
    workflow_run_id = handle.result_run_id or handle.run_id or ""
    if not workflow_run_id:
        workflow_run_id = (await handle.describe()).run_id
    return result, workflow_run_id, started


async def connect_soon(url: str) -> psycopg.AsyncConnection:
    """A connection, waiting up to RECONNECT_S for a Postgres that is restarting; then one line
    (DatabaseUnavailable)."""
    deadline = time.monotonic() + RECONNECT_S
    while True:
        try:
            return await connect_postgres(url)
        except DatabaseUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def main(args: argparse.Namespace) -> int:
    if log_format() is LogFormat.TEXT:  # at a terminal the printed outcome says it all
        log.setLevel(logging.WARNING)
    request = GroceryRequest(household=args.household, week=args.week)
    workflow_id = args.workflow_id or workflow_id_for(args.household, args.week)
    queue = args.task_queue or task_queue()
    if not queue.strip():
        raise ConfigError("the task queue name is empty")
    async with configured_grocer() as grocer:  # its settings checked before anything starts
        url = ensure_database_url()
        # No connection is held while the run goes on: Postgres may restart meanwhile.
        async with await connect_postgres(url) as conn:
            await ensure_schema(conn)
            client = await connect_temporal()
            ordered_before = (
                await prepare_again(client, conn, workflow_id, grocer) if args.again else []
            )
        result, workflow_run_id, started = await start_or_find(
            client, request, workflow_id, queue, args.again
        )
        async with await connect_soon(url) as conn:
            state = await read_run_state(conn, workflow_id, grocer)
    run_path = f"namespaces/{client.namespace}/workflows/{workflow_id}/{workflow_run_id}"
    link = f"{ui_url()}/{run_path}/history"
    outcome = {
        "workflow_id": workflow_id,
        "namespace": client.namespace,
        "workflow_run_id": workflow_run_id,
        "already_ran": not started,
        "summary": result.summary.text,
        "order_id": result.order.order_id,
        "model_calls": state.model_calls,
        "orders": len(state.orders),
        "emails": len(state.emails),
        "ui": link,
        "ordered_before": ordered_before,  # --again: the week's orders before this run
    }
    log.info(
        "%s %s: order #%s, %s",
        workflow_id,
        "completed" if started else "already ran",
        result.order.order_id,
        state.counts_text(),
        extra={"workflow_id": workflow_id, "workflow_run_id": workflow_run_id},
    )
    if args.json:
        print(json.dumps(outcome))
        return 0
    if not started:
        print(f"{workflow_id} already ran; not ordering again. Its outcome:")
    if ordered_before:
        found = ", ".join(f"#{order_id}" for order_id in ordered_before)
        print(f"again:    the week already had order {found}; found, not placed again")
    print(f"summary:  {visible(result.summary.text)}")  # a model's text: escape codes shown
    print(f"order:    #{result.order.order_id}")
    print(f"counts:   {state.counts_text()}")
    print(f"history:  {link}")
    return 0


if __name__ == "__main__":
    run_main(main(parse_args()))
