"""What the framework agents' tools and models do to the world: rows in the examples' ledger.

A tool's effect is keyed like our agent's, from the activity it runs in
(`{workflow_id}:{activity_id}`), or not at all. A model call is recorded too (`model call N`),
never keyed: a provider takes no idempotency key, so a crash after the model activity returned
and before Temporal recorded it pays for the call again. `effects_of` leaves the model calls out
(what the tools did); `effects_and_model_calls_of` shows them.

With EFFECTS_URL set, each effect is also sent to that HTTP service, as an agent's tools send
theirs: a model call as `POST /v1/chat/completions`, a tool's effect as `POST /effects` with its
key in `Idempotency-Key` (none unkeyed), and EFFECTS_TOKEN as the bearer token. The ledger is
written first, so the hand-written observers and crashtest's HTTP observer (`--http`) see the
same runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from examples.shapes.ledger import create_table, record_on, workflow_key
from examples.shapes.ledger import effects_of as ledger_of
from infra.config import env_str
from infra.db import connect_postgres, ensure_database_url

MODEL_CALL = "model call"


async def ensure_ledger() -> None:
    """The ledger's table, for a worker factory (the frameworks' tools open no pool)."""
    async with await connect_postgres(ensure_database_url()) as conn:
        await create_table(conn)


STICKY = timedelta(seconds=1)  # a dead worker's sticky queue is given up after 1 s, not 10 s


async def framework_worker(
    client: Client,
    task_queue: str,
    workflows: Sequence[type],
    activities: Sequence[Callable[..., Any]] = (),
) -> Worker:
    """FACTORY(client, task_queue) for a framework's agent: the ledger's table, and a worker for
    the workflow and the tools' activities (the framework's plugin, on `client`, adds its own)."""
    await ensure_ledger()
    return Worker(
        client,
        task_queue=task_queue,
        workflows=workflows,
        activities=activities,
        sticky_queue_schedule_to_start_timeout=STICKY,
    )


async def take(what: str, *, keyed: bool) -> None:
    """Record an effect of the activity this runs in (a tool, a model call); with EFFECTS_URL,
    send it there too."""
    key = workflow_key() if keyed else None
    async with await connect_postgres(ensure_database_url()) as conn:
        await record_on(conn, what, key)
    if url := env_str("EFFECTS_URL"):
        await _send(url, what, key)


async def _send(url: str, what: str, key: str | None) -> None:
    parts = urlsplit(url)
    path = "/v1/chat/completions" if what.startswith(MODEL_CALL) else "/effects"
    target = urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))
    headers = {"Idempotency-Key": key} if key else {}
    if token := env_str("EFFECTS_TOKEN"):
        headers["Authorization"] = f"Bearer {token}"
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.post(target, json={"what": what}, headers=headers) as answer,
    ):
        answer.raise_for_status()


async def effects_of(workflow_id: str) -> dict[str, list[str]]:
    """crashtest's OBSERVE: what the tools did (the model calls left out), sorted: the model asks
    for tools together and the framework runs them at once, in no fixed order."""
    effects = (await ledger_of(workflow_id))["effects"]
    return {"effects": sorted(e for e in effects if not e.startswith(MODEL_CALL))}


async def effects_and_model_calls_of(workflow_id: str) -> dict[str, object]:
    """crashtest's OBSERVE with the model calls counted: the window no key closes."""
    calls = sum(1 for e in (await ledger_of(workflow_id))["effects"] if e.startswith(MODEL_CALL))
    return {**(await effects_of(workflow_id)), "model_calls": calls}


# Two tools, for the frameworks that run a Temporal activity as a tool (Strands, Google ADK):
# each call is an activity of its own, its effect keyed like our agent's (`{workflow_id}:
# {activity_id}`), or not at all.
@activity.defn
async def place_order(item: str, quantity: int) -> str:
    """Order `quantity` of `item` from the grocer."""
    await take(f"order {quantity} x {item}", keyed=True)
    return f"ordered {quantity} x {item}"


@activity.defn
async def send_message(to: str, text: str) -> str:
    """Send `text` to `to`."""
    await take(f"message to {to}: {text}", keyed=True)
    return f"told {to}"


@activity.defn
async def place_order_unkeyed(item: str, quantity: int) -> str:
    """Order `quantity` of `item` from the grocer."""
    await take(f"order {quantity} x {item}", keyed=False)
    return f"ordered {quantity} x {item}"


@activity.defn
async def send_message_unkeyed(to: str, text: str) -> str:
    """Send `text` to `to`."""
    await take(f"message to {to}: {text}", keyed=False)
    return f"told {to}"
