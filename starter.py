"""`python starter.py`: start one grocery run, wait for it, print the outcome.

The workflow id is a business id, `grocery-{household}-{week}`: one run per household per week.
Starting it again does not order again; it reports the run that already exists.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import re
import sys
from typing import Any

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from agent.data import GroceryRequest, GroceryResult
from agent.grocer import grocer_from_env
from agent.outcome import read_run_state
from infra.cli import run_main
from infra.config import task_queue
from infra.db import connect, database_url, ensure_schema
from infra.errors import AgentError, ConfigError
from infra.temporal_client import connect_temporal
from infra.temporal_server import ui_url
from workflows.grocery import GroceryAgentWorkflow

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_WEEK = re.compile(r"^\d{4}-W(0[1-9]|[1-4]\d|5[0-3])$")


def this_week() -> str:
    year, week, _ = datetime.date.today().isocalendar()
    return f"{year}-W{week:02d}"


def workflow_id_for(household: str, week: str) -> str:
    return f"grocery-{household}-{week}"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python starter.py", description=__doc__.splitlines()[0])
    parser.add_argument("--household", default="household-1")
    parser.add_argument("--week", default=None, help="ISO week like 2026-W49 (default: this week)")
    parser.add_argument("--workflow-id", default=None, help="override the business id")
    parser.add_argument("--task-queue", default=None, help="default: TASK_QUEUE or grocery-agent")
    parser.add_argument("--json", action="store_true", help="print the outcome as one JSON object")
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
    """Wait for the result; if it is slow to come, say once what it may be waiting for."""
    result = asyncio.ensure_future(handle.result())
    done, _ = await asyncio.wait({result}, timeout=5)
    if not done:
        print(
            f"still waiting for {handle.id}: is a worker running on task queue {queue}? "
            "(python worker.py)",
            file=sys.stderr,
            flush=True,
        )
    return await result


def reason(err: BaseException) -> str:
    """The innermost cause's message: a failed run's `Activity task failed` wraps the step's own
    error, which says what happened."""
    while (inner := getattr(err, "cause", None)) is not None:
        err = inner
    return getattr(err, "message", None) or str(err)


async def start_or_find(
    client: Client, request: GroceryRequest, workflow_id: str, queue: str
) -> tuple[GroceryResult, str, bool]:
    """Start the run, or find the one that already has this id. Returns (result, run id, new?)."""
    try:
        handle = await client.start_workflow(
            GroceryAgentWorkflow.run,
            request,
            id=workflow_id,
            task_queue=queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
        started = True
    except WorkflowAlreadyStartedError:
        handle = client.get_workflow_handle_for(GroceryAgentWorkflow.run, workflow_id)
        started = False
    try:
        result = await wait_telling_why(handle, queue)
    except WorkflowFailureError as err:
        raise AgentError(f"run {workflow_id} failed: {reason(err)}") from None
    run_id = handle.result_run_id or handle.run_id or ""
    if not run_id:
        run_id = (await handle.describe()).run_id
    return result, run_id, started


async def main(args: argparse.Namespace) -> int:
    request = GroceryRequest(household=args.household, week=args.week)
    workflow_id = args.workflow_id or workflow_id_for(args.household, args.week)
    queue = args.task_queue or task_queue()
    if not queue.strip():
        raise ConfigError("the task queue name is empty")
    grocer = grocer_from_env()
    try:
        async with await connect(database_url()) as conn:
            await ensure_schema(conn)
            client = await connect_temporal()
            result, run_id, started = await start_or_find(client, request, workflow_id, queue)
            state = await read_run_state(conn, workflow_id, grocer)
    finally:
        if grocer is not None:
            await grocer.client.close()
    link = f"{ui_url()}/namespaces/default/workflows/{workflow_id}/{run_id}/history"
    outcome = {
        "workflow_id": workflow_id,
        "run_id": run_id,
        "already_ran": not started,
        "summary": result.summary.text,
        "order_id": result.order.order_id,
        "model_calls": state.model_calls,
        "orders": len(state.orders),
        "emails": len(state.emails),
        "ui": link,
    }
    if args.json:
        print(json.dumps(outcome))
        return 0
    if not started:
        print(f"{workflow_id} already ran; not ordering again. Its outcome:")
    print(f"summary:  {result.summary.text}")
    print(f"order:    #{result.order.order_id}")
    print(f"counts:   {state.counts_text()}")
    print(f"history:  {link}")
    return 0


if __name__ == "__main__":
    run_main(main(parse_args()))
