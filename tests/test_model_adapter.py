"""The OpenAI-compatible model adapter, through a real HTTP exchange with a server on 127.0.0.1,
inside real Temporal runs: an answer, a 429 then an answer (retried), a 400 (not retried)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable

from psycopg.conninfo import conninfo_to_dict, make_conninfo
from temporalio.client import Client

from infra.processes import free_port
from starter import this_week
from tests.fake_openai import FakeOpenAI
from tests.helpers import (
    GROCER_API_KEY,
    RESULT_TIMEOUT_S,
    WorkerProcess,
    assert_one_line_error,
    attempts,
    child_env,
    new_run_id,
    run_python,
    scrape,
)


async def run_with(
    fake: FakeOpenAI, db_url: str, address: str, workers: Callable[..., WorkerProcess]
) -> tuple[str, subprocess.CompletedProcess[str]]:
    queue, household = new_run_id("q"), new_run_id("h")
    workers(queue, **fake.env())
    done = await asyncio.to_thread(
        run_python,
        ["starter.py", "--task-queue", queue, "--household", household, "--json"],
        child_env(db_url, TEMPORAL_ADDRESS=address),
        RESULT_TIMEOUT_S,
    )
    return f"grocery-{household}-{this_week()}", done


async def test_an_answer(
    provider: FakeOpenAI, db_url: str, temporal_address: str,
    workers: Callable[..., WorkerProcess],
) -> None:  # fmt: skip
    _, done = await run_with(provider, db_url, temporal_address, workers)
    out = json.loads(done.stdout)
    assert (out["model_calls"], out["orders"], out["emails"]) == (3, 1, 1)
    assert provider.requests == 3


async def test_a_429_is_retried(
    provider: FakeOpenAI, db_url: str, temporal_address: str,
    workers: Callable[..., WorkerProcess], client: Client,
) -> None:  # fmt: skip
    provider.script.append("429")
    workflow_id, done = await run_with(provider, db_url, temporal_address, workers)
    assert done.returncode == 0, done.stderr
    assert (await attempts(client, workflow_id))[0] == 2  # the plan step, on its second attempt
    assert provider.requests == 4


async def test_a_400_fails_the_step_without_retry(
    provider: FakeOpenAI, db_url: str, temporal_address: str,
    workers: Callable[..., WorkerProcess], client: Client,
) -> None:  # fmt: skip
    provider.script.append("400")
    workflow_id, done = await run_with(provider, db_url, temporal_address, workers)
    assert_one_line_error(done, "answered 400: The model `grocer-llm` does not exist")
    assert await attempts(client, workflow_id) == [1]
    assert provider.requests == 1


def test_missing_settings_are_one_line(db_url: str, temporal_address: str) -> None:
    done = run_python(
        ["worker.py"], child_env(db_url, TEMPORAL_ADDRESS=temporal_address, MODEL="openai")
    )
    assert_one_line_error(done, "MODEL=openai needs MODEL_BASE_URL and MODEL_NAME")
    bad = run_python(["worker.py"], child_env(db_url, TEMPORAL_ADDRESS=temporal_address,
                                              MODEL="claude-ish"))  # fmt: skip
    assert_one_line_error(bad, "unknown MODEL 'claude-ish'; valid: stub, openai")


async def test_no_secret_leaves_in_an_error_line_a_log_or_the_history(
    provider: FakeOpenAI, db_url: str, temporal_address: str, grocer_url: str,
    workers: Callable[..., WorkerProcess], client: Client,
) -> None:  # fmt: skip
    """The provider echoes the request's Authorization header in its error, the base URL carries
    credentials, the database URL a password (libpq's key=value form) and the grocer key is set:
    none reaches the starter's output, the worker's log, its metrics or the run's durable history
    (the starter is not even told the model's secrets: the history itself is clean)."""
    key, url_password = "sk-SENTINEL-key-0123456789", "URL-SENTINEL-9876"
    db_password = str(conninfo_to_dict(db_url).get("password") or "DB-SENTINEL-5555")
    worker_db_url = make_conninfo(db_url, password=db_password)  # trust auth: ignored if unasked
    provider.script.append("echo-auth")
    queue, household, port = new_run_id("q"), new_run_id("h"), free_port()
    base_url = provider.base_url.replace("http://", f"http://robot:{url_password}@")
    worker = workers(queue, **{**provider.env(), "MODEL_API_KEY": key,
                               "MODEL_BASE_URL": base_url, "DATABASE_URL": worker_db_url,
                               "METRICS_PORT": str(port), "ORDER_BACKEND": "grocer",
                               "GROCER_URL": grocer_url})  # fmt: skip
    done = await asyncio.to_thread(
        run_python,
        ["starter.py", "--task-queue", queue, "--household", household],
        child_env(db_url, TEMPORAL_ADDRESS=temporal_address),
        RESULT_TIMEOUT_S,
    )
    # httpx sends the URL's credentials as Basic auth: hidden too, though base64 hides nothing.
    assert_one_line_error(done, "answered 400: Invalid credentials: Basic ***")
    workflow_id = f"grocery-{household}-{this_week()}"
    history = (await client.get_workflow_handle(workflow_id).fetch_history()).to_json()
    assert "Invalid credentials" in history  # the failure is there, without the secret
    metrics = scrape(port)
    assert "grocery_effects_created" in metrics or "temporal_" in metrics
    for secret in (key, url_password, db_password, GROCER_API_KEY):
        assert secret not in done.stdout + done.stderr
        assert secret not in worker.log()
        assert secret not in metrics
        assert secret not in history


def test_a_model_key_is_not_sent_in_clear_to_another_machine(
    db_url: str, temporal_address: str
) -> None:
    env = {"MODEL": "openai", "MODEL_BASE_URL": "http://models.example.com/v1",
           "MODEL_NAME": "m", "MODEL_API_KEY": "sk-0123456789"}  # fmt: skip
    done = run_python(["worker.py"], child_env(db_url, TEMPORAL_ADDRESS=temporal_address, **env))
    assert_one_line_error(done, "MODEL_API_KEY would go in clear to models.example.com over http")
    assert "sk-0123456789" not in done.stderr
