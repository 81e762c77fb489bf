"""The grocery agent on a real Temporal dev server and real Postgres; workers SIGKILLed for real."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import re
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.worker import Replayer
from temporalio.workflow import NondeterminismError

from agent.data import EXAMPLE_WEEK
from starter import this_week
from tests.helpers import (
    GROCER_API_KEY,
    GROCER_TTL_S,
    RESULT_TIMEOUT_S,
    STRANGER_API_KEY,
    WorkerProcess,
    assert_one_line_error,
    attempts,
    child_env,
    crash_then_resume,
    failing_starter,
    new_run_id,
    run_python,
    starter,
    state,
)
from tests.reordered_workflow import ReorderedGroceryAgentWorkflow
from workflows.grocery import ACTIVITY_NAMES, GroceryAgentWorkflow

ORDER = ACTIVITY_NAMES.index("place_order")  # its activity's place in a run's history
# Every step up to the order run once: the order's failure is not retried.
TO_THE_ORDER = [1] * (ORDER + 1)

HISTORY = Path(__file__).parent / "histories" / "grocery_completed.json"


def test_no_crash_and_no_second_order_for_the_same_week(
    db_url: str, temporal_address: str, workers: Callable[..., WorkerProcess]
) -> None:
    queue = new_run_id("q")
    household = new_run_id("h")
    worker = workers(queue)
    first = starter(
        db_url, temporal_address, queue, "--household", household, "--week", EXAMPLE_WEEK
    )
    assert first["workflow_id"] == f"grocery-{household}-{EXAMPLE_WEEK}"
    assert (first["model_calls"], first["orders"], first["emails"]) == (3, 1, 1)
    assert f"#{first['order_id']}" in str(first["summary"])
    assert first["already_ran"] is False

    # The same household and week again: the existing run is reported, nothing is ordered.
    again = starter(
        db_url, temporal_address, queue, "--household", household, "--week", EXAMPLE_WEEK
    )
    assert again["already_ran"] is True
    assert again["workflow_run_id"] == first["workflow_run_id"]
    assert (again["order_id"], again["orders"], again["emails"]) == (first["order_id"], 1, 1)

    # SIGTERM is a graceful shutdown: exit code 0, not a crash.
    assert worker.stop() == 0, worker.log()


@pytest.mark.parametrize(
    ("crash_at", "key_strategy", "expected"),
    [
        ("after-effect:place_order", "workflow", (3, 1, 1)),
        # a retry keeps the run id, so this holds too
        ("after-effect:place_order", "run", (3, 1, 1)),
        # no key: the retried order is a second order
        ("after-effect:place_order", "none", (3, 2, 1)),
        ("after-effect:send_confirmation", "workflow", (3, 1, 1)),
        ("after-effect:send_confirmation", "none", (3, 1, 2)),  # no key: a second email
    ],
)
async def test_worker_killed_after_the_effect(
    crash_at: str,
    key_strategy: str,
    expected: tuple[int, int, int],
    client: Client,
    workers: Callable[..., WorkerProcess],
    db: psycopg.Connection,
) -> None:
    workflow_id, result, _ = await crash_then_resume(client, workers, crash_at, key_strategy)
    final = state(db, workflow_id)
    assert final.counts == expected
    # Temporal retried the killed activity: its second attempt ran on the new worker.
    step = ACTIVITY_NAMES.index(crash_at.split(":")[1])
    assert (await attempts(client, workflow_id))[step] == 2
    if expected == (3, 1, 1):
        assert result.order.order_id == final.orders[0].id
        assert f"#{result.order.order_id}" in final.emails[0].body
        assert f"#{result.order.order_id}" in result.summary.text


async def test_crash_point_named_by_its_activity(
    client: Client, workers: Callable[..., WorkerProcess], db: psycopg.Connection
) -> None:
    """--crash-at after-effect:5 is after-effect:place_order (the fifth activity, after the
    price check); crashtest's interceptor kills the worker there, from outside the activity's
    code."""
    workflow_id, _, _ = await crash_then_resume(client, workers, "after-effect:5", "none")
    assert state(db, workflow_id).counts == (3, 2, 1)


async def test_completed_steps_are_replayed_not_rerun(
    client: Client, workers: Callable[..., WorkerProcess], db: psycopg.Connection
) -> None:
    # No keys at all, so nothing but Temporal's history can keep the model calls at 3. The
    # worker dies once the workflow has seen the order recorded, before it schedules the email:
    # the fresh worker replays the steps to the order and runs the email and the summary once.
    workflow_id, _, _ = await crash_then_resume(
        client, workers, "after-checkpoint:place_order", "none"
    )
    assert state(db, workflow_id).counts == (3, 1, 1)
    assert await attempts(client, workflow_id) == [1] * len(ACTIVITY_NAMES)


async def test_saved_history_replays_cleanly() -> None:
    history = WorkflowHistory.from_json("grocery-history", HISTORY.read_text())
    replayer = Replayer(workflows=[GroceryAgentWorkflow], data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history)


async def test_changed_step_order_fails_replay_with_nondeterminism() -> None:
    history = WorkflowHistory.from_json("grocery-history", HISTORY.read_text())
    replayer = Replayer(
        workflows=[ReorderedGroceryAgentWorkflow], data_converter=pydantic_data_converter
    )
    with pytest.raises(NondeterminismError):
        await replayer.replay_workflow(history)


def test_worker_rejects_bad_settings(db_url: str, temporal_address: str) -> None:
    for env, message in [
        ({"KEY_STRATEGY": "random"}, "unknown key strategy 'random'; valid: workflow, run, none"),
        ({"METRICS_PORT": "http"}, "METRICS_PORT='http' is not a TCP port"),
        ({"ORDER_BACKEND": "grocer", "GROCER_URL": "not a url"},
         "GROCER_URL='not a url' is not an http(s) URL with a host"),
        ({"ORDER_BACKEND": "grocer", "GROCER_URL": "http://127.0.0.1:9", "GROCER_KEY_TTL_S": "nan"},
         "GROCER_KEY_TTL_S='nan' is not a finite number"),
        ({"STUB_MODEL_LATENCY_MS": "inf"}, "STUB_MODEL_LATENCY_MS='inf' is not a finite number"),
        ({"MODEL": "openai", "MODEL_BASE_URL": "http://127.0.0.1:9", "MODEL_NAME": "m",
          "MODEL_TIMEOUT_S": "0"}, "MODEL_TIMEOUT_S='0' must be more than 0"),
    ]:  # fmt: skip
        done = run_python(
            ["worker.py"], child_env(db_url, TEMPORAL_ADDRESS=temporal_address, **env)
        )
        assert_one_line_error(done, message)


def test_starter_rejects_a_bad_week(db_url: str, temporal_address: str) -> None:
    done = run_python(
        ["starter.py", "--week", "49"], child_env(db_url, TEMPORAL_ADDRESS=temporal_address)
    )
    assert done.returncode == 2  # argparse's usage line, then the error
    assert "expected an ISO week like 2026-W49" in done.stderr
    assert "Traceback" not in done.stderr


def grocer_faults(grocer_url: str, *faults: str) -> None:
    """The grocer's coming order requests show these faults (and only these: none is left
    from before)."""
    auth = {"Authorization": f"Bearer {GROCER_API_KEY}"}
    body = json.dumps({"next": list(faults)}).encode()
    for request in (
        urllib.request.Request(f"{grocer_url}/_faults", method="DELETE", headers=auth),
        urllib.request.Request(f"{grocer_url}/_faults", method="POST", headers=auth, data=body),
    ):
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200


async def test_the_grocer_slowing_us_down_is_retried(
    db_url: str, temporal_address: str, grocer_url: str,
    workers: Callable[..., WorkerProcess], client: Client,
) -> None:  # fmt: skip
    """A 429 and a 500 from the grocer: Temporal retries the order; one order in the end."""
    queue, household = new_run_id("q"), new_run_id("h")
    workers(queue, ORDER_BACKEND="grocer", GROCER_URL=grocer_url)
    grocer_faults(grocer_url, "rate-limit", "error")
    out = await asyncio.to_thread(
        starter, db_url, temporal_address, queue, "--household", household,
        ORDER_BACKEND="grocer", GROCER_URL=grocer_url,
    )  # fmt: skip
    assert (out["model_calls"], out["orders"], out["emails"]) == (3, 1, 1)
    assert (await attempts(client, str(out["workflow_id"])))[ORDER] == 3


async def test_an_order_the_grocer_refuses_fails_the_run_at_once(
    db_url: str, temporal_address: str, grocer_url: str,
    workers: Callable[..., WorkerProcess], client: Client, db: psycopg.Connection,
) -> None:  # fmt: skip
    queue, household = new_run_id("q"), new_run_id("h")
    workers(queue, ORDER_BACKEND="grocer", GROCER_URL=grocer_url)
    grocer_faults(grocer_url, "refuse")
    done = await failing_starter(
        db_url, temporal_address, queue, household, ORDER_BACKEND="grocer", GROCER_URL=grocer_url
    )
    assert_one_line_error(done, "failed: the grocer refused POST /orders (400)")
    workflow_id = f"grocery-{household}-{this_week()}"
    assert await attempts(client, workflow_id) == TO_THE_ORDER  # not retried
    assert state(db, workflow_id).emails == []


def grocer_order(grocer_url: str, key: str, reference: str, lines: list[dict[str, Any]]) -> None:
    """An order placed straight at the grocer, as anyone holding the account's `key` can."""
    body = json.dumps({"reference": reference, "lines": lines}).encode()
    request = urllib.request.Request(
        f"{grocer_url}/orders", data=body, method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 201


async def test_an_order_planted_under_our_reference_is_not_confirmed(
    db_url: str, temporal_address: str, grocer_url: str,
    workers: Callable[..., WorkerProcess], client: Client, db: psycopg.Connection,
) -> None:  # fmt: skip
    """The effect check looks the order up by its reference before every order. An order found
    there that this run did not mean to place (24 x caviar) fails the run on its first attempt,
    naming both, and no email goes out. A stranger's account cannot plant one at all: with the
    same order under the same reference in another account, the run, through three 500s that
    outlast the 1 s TTL, places its own one order."""
    caviar = [{"item": "caviar", "quantity": 24}]
    queue, household = new_run_id("q"), new_run_id("h")
    workers(
        queue, ORDER_BACKEND="grocer", GROCER_URL=grocer_url, GROCER_KEY_TTL_S=str(GROCER_TTL_S)
    )
    workflow_id = f"grocery-{household}-{this_week()}"
    grocer_order(grocer_url, GROCER_API_KEY, f"{workflow_id}:4", caviar)
    done = await failing_starter(
        db_url, temporal_address, queue, household, ORDER_BACKEND="grocer", GROCER_URL=grocer_url
    )
    assert_one_line_error(done, f"under reference {workflow_id}:4 and none is the one this run")
    assert "found 24 x caviar" in done.stderr
    assert state(db, workflow_id).emails == []
    assert (await attempts(client, workflow_id))[ORDER:] == [1]  # not retried

    household = new_run_id("h")
    workflow_id = f"grocery-{household}-{this_week()}"
    grocer_order(grocer_url, STRANGER_API_KEY, f"{workflow_id}:4", caviar)
    grocer_faults(grocer_url, "error", "error", "error")
    out = await asyncio.to_thread(
        starter, db_url, temporal_address, queue, "--household", household,
        ORDER_BACKEND="grocer", GROCER_URL=grocer_url,
    )  # fmt: skip
    assert (out["model_calls"], out["orders"], out["emails"]) == (3, 1, 1)
    assert (await attempts(client, workflow_id))[ORDER] == 4  # the fourth found no order: placed


class NotFoundPage(http.server.BaseHTTPRequestHandler):
    """What a web server says of a path it does not serve."""

    def _not_found(self) -> None:
        page = b"<html><body><h1>404 Not Found</h1></body></html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    do_GET = do_POST = _not_found

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet in the test's output


async def test_a_wrong_grocer_path_fails_the_run_at_once(
    db_url: str, temporal_address: str, workers: Callable[..., WorkerProcess], client: Client
) -> None:
    """GROCER_URL with a wrong path, on a web server that answers 404 with an HTML page: the
    status says the request will never succeed, whatever the body; not retried."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFoundPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/not-the-api"
        queue, household = new_run_id("q"), new_run_id("h")
        workers(queue, ORDER_BACKEND="grocer", GROCER_URL=url)
        done = await failing_starter(
            db_url, temporal_address, queue, household, ORDER_BACKEND="grocer", GROCER_URL=url
        )
        assert_one_line_error(done, "the grocer refused GET /orders (404)")  # the effect check
        workflow_id = f"grocery-{household}-{this_week()}"
        assert await attempts(client, workflow_id) == TO_THE_ORDER  # not retried
    finally:
        server.shutdown()
        server.server_close()


ELSEWHERE = "grocery-elsewhere"


async def test_a_run_in_another_namespace_lands_there(
    db_url: str, temporal_address: str, workers: Callable[..., WorkerProcess], client: Client
) -> None:
    """TEMPORAL_NAMESPACE (read through temporalio.envconfig, as the Temporal CLI reads it)
    puts the worker and the run in that namespace, and the starter's link names it."""
    with contextlib.suppress(RPCError):  # registered by an earlier run of this test
        await client.workflow_service.register_namespace(
            RegisterNamespaceRequest(
                namespace=ELSEWHERE, workflow_execution_retention_period=Duration(seconds=86400)
            )
        )
    queue, household = new_run_id("q"), new_run_id("h")
    workers(queue, TEMPORAL_NAMESPACE=ELSEWHERE)
    out = await asyncio.to_thread(
        starter, db_url, temporal_address, queue, "--household", household,
        TEMPORAL_NAMESPACE=ELSEWHERE,
    )  # fmt: skip
    assert (out["namespace"], out["orders"]) == (ELSEWHERE, 1)
    assert f"/namespaces/{ELSEWHERE}/workflows/" in str(out["ui"])
    elsewhere = await Client.connect(temporal_address, namespace=ELSEWHERE)
    await elsewhere.get_workflow_handle(str(out["workflow_id"])).describe()  # it is there
    with pytest.raises(RPCError, match="not found"):
        await client.get_workflow_handle(str(out["workflow_id"])).describe()  # not in default


@pytest.mark.parametrize(
    "request_", [{"household": "bob@evil.test>\r\nBcc: eve@evil.test", "week": EXAMPLE_WEEK},
                 {"household": "bob", "week": "2026-W99"}, {"household": "", "week": "x"}],
)  # fmt: skip
async def test_a_run_started_past_the_starter_with_a_bad_input_fails_at_once(
    request_: dict[str, str], workers: Callable[..., WorkerProcess], client: Client,
    db: psycopg.Connection,
) -> None:  # fmt: skip
    """`temporal workflow start` takes any JSON: a household with a line break (a Bcc: header
    in the confirmation) or a week off the ISO pattern fails the run on its first workflow task
    (not retried), before any step."""
    queue, workflow_id = new_run_id("q"), new_run_id("bad-input")
    workers(queue)
    handle = await client.start_workflow(
        "GroceryAgentWorkflow", request_, id=workflow_id, task_queue=queue
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    assert re.search(r"validation errors? for GroceryRequest", str(failed.value.cause))
    assert await attempts(client, workflow_id) == []  # no step ran
    assert state(db, workflow_id).emails == []
