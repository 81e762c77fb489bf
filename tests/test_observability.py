"""What an operator sees: JSON logs in which a refused duplicate is one countable line, and the
metrics endpoint with the SDK's metrics beside our effect counters. Real workers, SIGKILLed."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import Callable
from typing import Any

import psycopg
from temporalio.client import Client

from infra.processes import free_port
from tests.helpers import (
    RESULT_TIMEOUT_S,
    WorkerProcess,
    assert_one_line_error,
    child_env,
    crash_then_resume,
    new_run_id,
    run_python,
    scrape,
    state,
)


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of a JSON log, parsed: a line that is not one JSON object fails the test."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def counter(metrics: str, name: str, effect: str) -> float:
    """The value of our counter `name` for `effect` (0 if it was never counted)."""
    pattern = rf'^{name}(?:_total)?\{{[^}}]*effect="{effect}"[^}}]*\}} (\S+)$'
    values = [float(m.group(1)) for m in re.finditer(pattern, metrics, re.MULTILINE)]
    return sum(values)


async def test_json_log_of_a_crashed_run_shows_the_refused_duplicate_order(
    client: Client, workers: Callable[..., WorkerProcess], db: psycopg.Connection
) -> None:
    port = free_port()
    workflow_id, result, resumed = await crash_then_resume(
        client, workers, "after-effect:place_order", "workflow",
        LOG_FORMAT="json", METRICS_PORT=str(port),
    )  # fmt: skip
    assert state(db, workflow_id).counts == (3, 1, 1)

    lines = json_lines(resumed.log())
    refused = [line for line in lines if line.get("event") == "duplicate_refused"]
    assert len(refused) == 1, refused  # the order, and nothing else, was a retried effect
    (line,) = refused
    assert line["effect"] == "orders"
    assert line["workflow_id"] == workflow_id
    assert line["activity"] == "place_order"
    assert line["attempt"] == 2  # the first attempt died with worker A
    assert line["idempotency_key"] == f"{workflow_id}:4"
    assert line["row_id"] == result.order.order_id
    assert "duplicate refused" in line["message"]
    # The resumed worker created only what came after the order.
    created = {line["effect"] for line in lines if line.get("event") == "effect_created"}
    assert created == {"emails", "model_calls"}

    # The counter says the same as the log.
    metrics = scrape(port)
    assert counter(metrics, "grocery_duplicates_refused", "orders") == 1
    assert counter(metrics, "grocery_effects_created", "orders") == 0
    assert counter(metrics, "grocery_effects_created", "emails") == 1


async def test_metrics_endpoint_serves_the_sdk_metrics_and_ours(
    db_url: str, temporal_address: str, workers: Callable[..., WorkerProcess]
) -> None:
    """...on an IPv6 METRICS_HOST (the loopback ::1)."""
    port, queue = free_port(), new_run_id("q")
    workers(queue, METRICS_PORT=str(port), METRICS_HOST="::1")
    done = await asyncio.to_thread(
        run_python,
        ["starter.py", "--task-queue", queue, "--household", new_run_id("h"), "--json"],
        child_env(db_url, TEMPORAL_ADDRESS=temporal_address), RESULT_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    metrics = scrape(port, "::1")
    # The SDK's own: the worker completed this run's workflow and activities.
    assert re.search(r'^temporal_workflow_completed\S*\{[^}]*task_queue="' + queue, metrics, re.M)
    assert re.search(r"^temporal_activity_execution_latency\S*\{[^}]*place_order", metrics, re.M)
    # Ours: what this run wrote, by effect, and no duplicate.
    assert counter(metrics, "grocery_effects_created", "model_calls") == 3
    assert counter(metrics, "grocery_effects_created", "orders") == 1
    assert counter(metrics, "grocery_effects_created", "emails") == 1
    assert counter(metrics, "grocery_duplicates_refused", "orders") == 0


def test_a_metrics_port_in_use_is_one_line(db_url: str, temporal_address: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_python(
            ["worker.py"],
            child_env(db_url, TEMPORAL_ADDRESS=temporal_address, METRICS_PORT=str(port)),
        )
    assert_one_line_error(
        done, f"METRICS_PORT={port}: cannot serve metrics on 127.0.0.1:{port}: Address already"
    )


def test_bad_log_format_is_one_line(db_url: str) -> None:
    done = run_python(["starter.py", "--household", "x"], child_env(db_url, LOG_FORMAT="yaml"))
    assert_one_line_error(done, "unknown LOG_FORMAT 'yaml'; valid: text, json")


def test_a_json_error_is_one_json_line(db_url: str) -> None:
    done = run_python(
        ["starter.py", "--household", "x"],
        child_env(db_url, LOG_FORMAT="json", ORDER_BACKEND="fax"),
    )
    assert done.returncode == 2, done.stderr
    (line,) = json_lines(done.stderr)
    assert line["level"] == "ERROR" and "unknown order backend 'fax'" in line["message"], line
