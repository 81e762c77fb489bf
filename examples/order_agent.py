"""A small agent written by hand on Temporal, in Python, as `examples/typescript/src/agent.ts` is
in TypeScript (the same workflow type, activity names and options): it asks a model (an
OpenAI-compatible provider at MODEL_URL, `examples/model_stub.py` in the tests) what to do, runs
the tools it calls (`place_order`, `send_message`), each an activity, and asks again until the
model answers in words.

Each effect is a row in the examples' ledger (`examples.frameworks.effects.take`): a model call
(`model call N`, N the turn, from the conversation) never keyed — a provider takes no key — and
each tool's effect keyed by `{workflow_id}:{activity_id}` with AGENT_KEYED=1, else not. Observe
it with `examples.frameworks.effects:effects_and_model_calls_of`.

    python -m temporal_crashtest run --worker examples.order_agent:worker \\
        --workflow examples.order_agent:OrderAgent --input '"milk"' \\
        --observe examples.frameworks.effects:effects_and_model_calls_of
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    import aiohttp

    from examples.frameworks.effects import MODEL_CALL, framework_worker, take

TURNS = 5  # a model that keeps calling tools is stopped here
# A killed worker is noticed after 2 s (the calls are quick, so they need not heartbeat).
OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "heartbeat_timeout": timedelta(seconds=2),
    "retry_policy": RetryPolicy(initial_interval=timedelta(milliseconds=200)),
}


def _keyed() -> bool:
    return bool(os.environ.get("AGENT_KEYED"))


@activity.defn
async def call_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One turn: the conversation to the provider, its next message back (paid, unkeyed)."""
    turn = 1 + sum(m.get("role") == "assistant" for m in messages)
    await take(f"{MODEL_CALL} {turn}", keyed=False)
    url = os.environ["MODEL_URL"].rstrip("/") + "/chat/completions"
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.post(url, json={"model": "stub", "messages": messages}) as reply,
    ):
        reply.raise_for_status()
        message: dict[str, Any] = (await reply.json())["choices"][0]["message"]
        return message


@activity.defn
async def place_order(item: str, quantity: int) -> str:
    await take(f"order {quantity} x {item}", keyed=_keyed())
    return f"ordered {quantity} x {item}"


@activity.defn
async def send_message(to: str, text: str) -> str:
    await take(f"message to {to}: {text}", keyed=_keyed())
    return f"told {to}"


TOOLS = frozenset({"place_order", "send_message"})  # the activities the model may call


@workflow.defn
class OrderAgent:
    @workflow.run
    async def run(self, item: str) -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"order {item}"}]
        for _ in range(TURNS):
            reply = await workflow.execute_activity(call_model, messages, **OPTIONS)
            messages.append(reply)
            if not reply.get("tool_calls"):
                return str(reply.get("content") or "")
            for call in reply["tool_calls"]:  # one after another: a fixed order of activities
                tool = call["function"]
                if tool["name"] not in TOOLS:
                    raise ApplicationError(f"the model called no tool of ours: {tool['name']}")
                arguments = list(json.loads(tool["arguments"]).values())
                result = await workflow.execute_activity(
                    tool["name"], args=arguments, result_type=str, **OPTIONS
                )
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        return "the model kept calling tools"


async def worker(client: Client, task_queue: str) -> Worker:
    return await framework_worker(
        client, task_queue, [OrderAgent], [call_model, place_order, send_message]
    )
