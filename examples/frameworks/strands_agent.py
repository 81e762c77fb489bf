"""A Strands agent on Temporal (`temporalio.strands_agents`: `TemporalAgent`, `StrandsPlugin`): its
scripted model (a `strands.models.Model`, offline and deterministic) first asks for two tools in
one response — place an order and send a message, each a Temporal activity (`activity_as_tool`),
which Strands runs at once — then answers.

    python -m temporal_crashtest run --plugin examples.frameworks.strands_agent:plugin \\
        --worker examples.frameworks.strands_agent:unkeyed_worker \\
        --workflow examples.frameworks.strands_agent:UnkeyedOrderAgent --input '"milk"' \\
        --observe examples.frameworks.effects:effects_of

The plugin brings the model activity (the model is named `scripted` in the workflow) and the
sandbox's pass-throughs; the factory names the workflow and the tools' activities. The model
answers from the conversation it is given (never from a counter: the worker that takes over
after a kill must answer as the killed one would have): tools first, then text once the tools'
results are in.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from strands.models import Model
    from temporalio.strands_agents import StrandsPlugin, TemporalAgent
    from temporalio.strands_agents.workflow import activity_as_tool

    from examples.frameworks.effects import (
        MODEL_CALL,
        framework_worker,
        place_order,
        place_order_unkeyed,
        send_message,
        send_message_unkeyed,
        take,
    )

MODEL = "scripted"
# As the other frameworks' examples: a killed worker's activity is noticed in 10 s (crashtest
# ends its attempt at once anyway), retries bounded (they spend).
OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "heartbeat_timeout": timedelta(seconds=10),
    "retry_policy": RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
}


def _tool_events(tool_use_id: str, name: str, arguments: dict[str, Any]) -> list[Any]:
    return [
        {"contentBlockStart": {"start": {"toolUse": {"toolUseId": tool_use_id, "name": name}}}},
        {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(arguments)}}}},
        {"contentBlockStop": {}},
    ]


class ScriptedModel(Model):
    """Order and tell, both at once; once both results are in, say what was done."""

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model answers in text and tool calls only")

    async def stream(
        self, messages: Any, tool_specs: Any = None, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        turns = sum(1 for m in messages if m.get("role") == "assistant") + 1
        await take(f"{MODEL_CALL} {turns}", keyed=False)
        results = [
            block["toolResult"]
            for m in messages
            for block in m.get("content", [])
            if "toolResult" in block
        ]
        yield {"messageStart": {"role": "assistant"}}
        if not results:
            item = next(
                (b["text"] for m in messages for b in m.get("content", []) if "text" in b), "milk"
            )
            names = [spec["name"] for spec in tool_specs or []]
            order = next(n for n in names if n.startswith("place_order"))
            tell = next(n for n in names if n.startswith("send_message"))
            for event in [
                *_tool_events("order-1", order, {"item": item, "quantity": 2}),
                *_tool_events("message-1", tell, {"to": "sam", "text": f"2 x {item} ordered"}),
            ]:
                yield event
            yield {"messageStop": {"stopReason": "tool_use"}}
        else:
            said = "; ".join(str(c.get("text", "")) for r in results for c in r.get("content", []))
            yield {"contentBlockDelta": {"delta": {"text": said}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
        yield {
            "metadata": {
                "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
                "metrics": {"latencyMs": 0},
            }
        }


def plugin() -> StrandsPlugin:
    """crashtest's --plugin: the scripted model, built afresh in every process."""
    return StrandsPlugin(models={MODEL: ScriptedModel})


def _agent(*tools: Any) -> TemporalAgent:
    return TemporalAgent(
        model=MODEL,
        **OPTIONS,
        tools=[activity_as_tool(t, **OPTIONS) for t in tools],
        callback_handler=None,
    )


@workflow.defn
class KeyedOrderAgent:
    @workflow.run
    async def run(self, item: str) -> str:
        return str(await _agent(place_order, send_message).invoke_async(item))


@workflow.defn
class UnkeyedOrderAgent:
    @workflow.run
    async def run(self, item: str) -> str:
        agent = _agent(place_order_unkeyed, send_message_unkeyed)
        return str(await agent.invoke_async(item))


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await framework_worker(
        client, task_queue, [KeyedOrderAgent], [place_order, send_message]
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await framework_worker(
        client, task_queue, [UnkeyedOrderAgent], [place_order_unkeyed, send_message_unkeyed]
    )
