"""One order per household and week, whatever runs the week again: `starter.py --again` after a
failed run, and a `temporal workflow reset` of a finished one, both after the grocer forgot the
order's idempotency key. With the effect check the new run finds the order by its reference; with
it off (the lab's comparison) the grocer takes a second order, which shows the test can fail."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client

from agent.steps import order_reference
from starter import this_week
from tests.fake_openai import FakeOpenAI
from tests.helpers import (
    GROCER_API_KEY,
    GROCER_TTL_S,
    RESULT_TIMEOUT_S,
    WorkerProcess,
    child_env,
    new_run_id,
    run_python,
    starter,
)

CHECK = pytest.mark.parametrize(("check", "orders"), [("on", 1), ("off", 2)])


def grocer_orders(grocer_url: str, workflow_id: str) -> list[int]:
    """The ids of the orders the grocer holds under the run's reference."""
    query = urllib.parse.urlencode({"reference": order_reference(workflow_id)})
    request = urllib.request.Request(
        f"{grocer_url}/orders?{query}", headers={"Authorization": f"Bearer {GROCER_API_KEY}"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return [order["id"] for order in json.loads(response.read())["orders"]]


@CHECK
async def test_again_after_the_key_expired_orders_once(
    check: str, orders: int, provider: FakeOpenAI, db_url: str, temporal_address: str,
    grocer_url: str, workers: Callable[..., WorkerProcess],
) -> None:  # fmt: skip
    """The run fails at its summary (an answer Postgres refuses) after ordering and emailing;
    the key expires; `--again` runs the week again and says the order was there already."""
    queue, household = new_run_id("q"), new_run_id("h")
    env = {**provider.env(), "ORDER_BACKEND": "grocer", "GROCER_URL": grocer_url,
           "ORDER_EFFECT_CHECK": check}  # fmt: skip
    workers(queue, **env)
    provider.hostile["summarise"] = '{"text": NaN}'
    args = ["starter.py", "--task-queue", queue, "--household", household]
    failed = await asyncio.to_thread(
        run_python, args, child_env(db_url, TEMPORAL_ADDRESS=temporal_address, **env),
        RESULT_TIMEOUT_S,
    )  # fmt: skip
    assert failed.returncode == 2 and "run it again with --again" in failed.stderr
    workflow_id = f"grocery-{household}-{this_week()}"
    first = grocer_orders(grocer_url, workflow_id)
    assert len(first) == 1
    provider.hostile.clear()
    await asyncio.sleep(GROCER_TTL_S + 0.5)  # the grocer has forgotten the key

    again = await asyncio.to_thread(
        run_python, [*args, "--again"],
        child_env(db_url, TEMPORAL_ADDRESS=temporal_address, **env), RESULT_TIMEOUT_S,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert f"the week already had order #{first[0]}; found, not placed again" in again.stdout
    assert len(grocer_orders(grocer_url, workflow_id)) == orders


async def reset_to_before(client: Client, workflow_id: str, activity: str) -> str:
    """`temporal workflow reset` of the run to the workflow task before `activity` was
    scheduled; the new run's id."""
    handle = client.get_workflow_handle(workflow_id)
    events = (await handle.fetch_history()).events
    scheduled = next(
        e.event_id for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity
    )  # fmt: skip
    task_done = max(
        e.event_id for e in events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED and e.event_id < scheduled
    )  # fmt: skip
    reset = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id),
            reason="test: the week run again from before its order",
            workflow_task_finish_event_id=task_done,
            request_id=str(uuid.uuid4()),
        )
    )
    return reset.run_id


@CHECK
async def test_a_reset_after_the_key_expired_orders_once(
    check: str, orders: int, db_url: str, temporal_address: str, grocer_url: str,
    workers: Callable[..., WorkerProcess], client: Client,
) -> None:  # fmt: skip
    queue, household = new_run_id("q"), new_run_id("h")
    env = {"ORDER_BACKEND": "grocer", "GROCER_URL": grocer_url, "ORDER_EFFECT_CHECK": check}
    workers(queue, **env)
    out = await asyncio.to_thread(
        starter, db_url, temporal_address, queue, "--household", household, **env
    )
    workflow_id = str(out["workflow_id"])
    assert grocer_orders(grocer_url, workflow_id) == [out["order_id"]]
    await asyncio.sleep(GROCER_TTL_S + 0.5)  # the grocer has forgotten the key

    run_id = await reset_to_before(client, workflow_id, "place_order")
    await asyncio.wait_for(
        client.get_workflow_handle(workflow_id, run_id=run_id).result(), RESULT_TIMEOUT_S
    )
    assert len(grocer_orders(grocer_url, workflow_id)) == orders
