"""An OpenAI Agents SDK agent on Temporal (`OpenAIAgentsPlugin`, tools by `activity_as_tool`):
its scripted model (a `Model` of ours behind the plugin's `model_provider`, offline and
deterministic) first asks for two tools in one response — place an order and send a message —
then answers.

    python -m temporal_crashtest run --plugin examples.frameworks.openai_agents_agent:plugin \\
        --worker examples.frameworks.openai_agents_agent:unkeyed_worker \\
        --workflow examples.frameworks.openai_agents_agent:UnkeyedOrderAgent --input '"milk"' \\
        --observe examples.frameworks.effects:effects_of

The plugin brings the data converter and registers the model activity; the factory registers
the tools' activities. Keyed and unkeyed tools are separate activities (the model calls whichever
tools its agent has), so one worker process holds one kind.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

# The Agents SDK is passed through the sandbox by its plugin; our ledger is activity code.
with workflow.unsafe.imports_passed_through():
    from agents import Agent, Model, ModelProvider, ModelResponse, Runner, Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )
    from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
    from temporalio.openai_agents.workflow import activity_as_tool

    from examples.frameworks.effects import MODEL_CALL, ensure_ledger, take

STICKY = timedelta(seconds=1)  # a dead worker's sticky queue is given up after 1 s, not 10 s
# Quick activities that do not heartbeat: a 10 s heartbeat timeout notices a killed worker in
# 10 s, not the plugin's default 60 s start-to-close timeout, and leaves a loaded machine room
# (2 s once timed out a live worker's model call). crashtest ends a killed worker's attempt at
# once anyway, unless --real-timeouts.
TIMEOUTS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "heartbeat_timeout": timedelta(seconds=10),
    "retry_policy": RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
}


class ScriptedModel(Model):
    """Order and tell, both in one response; then say what was done. Runs in the plugin's model
    activity, where it records each call (a paid call, in production)."""

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [input] if isinstance(input, str) else list(input)
        outputs = [
            i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        calls = sum(
            1
            for i in items
            if isinstance(i, dict) and i.get("type") == "message" and i.get("role") == "assistant"
        ) + (2 if outputs else 1)
        await take(f"{MODEL_CALL} {calls}", keyed=False)
        tools = [t.name for t in kwargs.get("tools", args[2] if len(args) > 2 else [])]
        if not outputs:
            first = items[0]
            item = first if isinstance(first, str) else str(first.get("content", "milk"))
            order = next(t for t in tools if t.startswith("place_order"))
            tell = next(t for t in tools if t.startswith("send_message"))
            return ModelResponse(
                output=[
                    ResponseFunctionToolCall(
                        type="function_call",
                        id="c1",
                        call_id="c1",
                        name=order,
                        arguments=json.dumps({"item": item, "quantity": 2}),
                    ),
                    ResponseFunctionToolCall(
                        type="function_call",
                        id="c2",
                        call_id="c2",
                        name=tell,
                        arguments=json.dumps({"to": "sam", "text": f"2 x {item} ordered"}),
                    ),
                ],
                usage=Usage(),
                response_id=None,
            )
        text = "; ".join(str(o.get("output")) for o in outputs)
        message = ResponseOutputMessage(
            id="m1",
            role="assistant",
            status="completed",
            type="message",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")


class ScriptedProvider(ModelProvider):
    def get_model(self, model_name: str | None) -> Model:
        return ScriptedModel()


def plugin() -> OpenAIAgentsPlugin:
    """crashtest's `--plugin`: the Agents SDK's plugin, with the scripted model."""
    return OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(**TIMEOUTS), model_provider=ScriptedProvider()
    )


async def _order(item: str, quantity: int, *, keyed: bool) -> str:
    await take(f"order {quantity} x {item}", keyed=keyed)
    return f"ordered {quantity} x {item}"


async def _message(to: str, text: str, *, keyed: bool) -> str:
    await take(f"message to {to}: {text}", keyed=keyed)
    return f"told {to}"


@activity.defn
async def place_order(item: str, quantity: int) -> str:
    """Order `quantity` of `item` (keyed by the activity, as our agent's order is)."""
    return await _order(item, quantity, keyed=True)


@activity.defn
async def send_message(to: str, text: str) -> str:
    """Send `text` to `to` (keyed)."""
    return await _message(to, text, keyed=True)


@activity.defn
async def place_order_unkeyed(item: str, quantity: int) -> str:
    """Order `quantity` of `item`, with no key."""
    return await _order(item, quantity, keyed=False)


@activity.defn
async def send_message_unkeyed(to: str, text: str) -> str:
    """Send `text` to `to`, with no key."""
    return await _message(to, text, keyed=False)


async def _run(item: str, tools: list[Any]) -> str:
    agent: Agent[None] = Agent(
        name="grocer",
        instructions="Order what is asked.",
        tools=[activity_as_tool(t, **TIMEOUTS) for t in tools],
    )
    result = await Runner.run(agent, item)
    return str(result.final_output)


@workflow.defn
class KeyedOrderAgent:
    @workflow.run
    async def run(self, item: str) -> str:
        return await _run(item, [place_order, send_message])


@workflow.defn
class UnkeyedOrderAgent:
    @workflow.run
    async def run(self, item: str) -> str:
        return await _run(item, [place_order_unkeyed, send_message_unkeyed])


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    await ensure_ledger()
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[KeyedOrderAgent],
        activities=[place_order, send_message],
        sticky_queue_schedule_to_start_timeout=STICKY,
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    await ensure_ledger()
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[UnkeyedOrderAgent],
        activities=[place_order_unkeyed, send_message_unkeyed],
        sticky_queue_schedule_to_start_timeout=STICKY,
    )
