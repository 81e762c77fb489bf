"""The OpenAI-compatible model adapter, through a real HTTP exchange with a server on 127.0.0.1,
inside real Temporal runs: an answer, a 429 then an answer (retried), a 400 (not retried)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator, Callable

import pytest
from temporalio.client import Client

from starter import this_week
from tests.fake_openai import FakeOpenAI
from tests.helpers import WorkerProcess, assert_one_line_error, child_env, new_run_id, run_python
from tests.test_temporal import RESULT_TIMEOUT_S, attempts


@pytest.fixture
async def provider() -> AsyncIterator[FakeOpenAI]:
    fake = FakeOpenAI()
    await fake.start()
    yield fake
    await fake.stop()


def model_env(fake: FakeOpenAI) -> dict[str, str]:
    return {"MODEL": "openai", "MODEL_BASE_URL": fake.base_url, "MODEL_NAME": "grocer-llm",
            "MODEL_API_KEY": "test-key"}  # fmt: skip


async def run_with(
    fake: FakeOpenAI, db_url: str, address: str, workers: Callable[..., WorkerProcess]
) -> tuple[str, subprocess.CompletedProcess[str]]:
    queue, household = new_run_id("q"), new_run_id("h")
    workers(queue, **model_env(fake))
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
