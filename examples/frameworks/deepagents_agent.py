"""A Deep Agent on Temporal (`temporalio-deepagents`: `DeepAgentsPlugin`,
`create_temporal_deep_agent`): its model calls run as activities, and so do its two tools (a
Temporal activity each, `activity_as_tool`). The scripted chat model (offline, answering from the
conversation it is given: never from a counter) asks for both tools in one turn, then answers.

    python -m temporal_crashtest run --plugin examples.frameworks.deepagents_agent:plugin \\
        --worker examples.frameworks.deepagents_agent:unkeyed_worker \\
        --workflow examples.frameworks.deepagents_agent:UnkeyedOrderAgent --input '"milk"' \\
        --observe examples.frameworks.effects:effects_of
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    # The plugin imports `deepagents` as each worker starts; imported here, where the worker
    # module loads, crashtest's fork server holds it, and every worker it forks for a cell starts
    # with it (measured: two thirds of each forked worker's CPU went to that import).
    import deepagents  # noqa: F401
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from temporalio.deepagents import (
        DeepAgentsPlugin,
        activity_as_tool,
        create_temporal_deep_agent,
    )

    from examples.frameworks.effects import MODEL_CALL, framework_worker, take

MODEL = "scripted"
TIMEOUT = timedelta(seconds=30)
RETRIES = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5)
# A killed worker's model call is noticed in 10 s (crashtest ends its attempt at once anyway).
MODEL_OPTIONS = {
    "start_to_close_timeout": TIMEOUT,
    "heartbeat_timeout": timedelta(seconds=10),
    "retry_policy": RETRIES,
}


class ScriptedChatModel(BaseChatModel):
    """Order and tell in one turn; once both results are in, say what was done."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("the scripted model answers asynchronously")

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        results = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
        turn = 2 if results else 1
        await take(f"{MODEL_CALL} {turn}", keyed=False)  # a provider takes no key
        if results:
            reply = AIMessage(content="; ".join(results))
        else:
            item = next((str(m.content) for m in messages if isinstance(m, HumanMessage)), "milk")
            reply = AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": "place_order",
                        "args": {"order": {"item": item, "quantity": 2}},
                        "id": "call-order",
                    },
                    {
                        "name": "send_message",
                        "args": {"message": {"to": "sam", "text": f"2 x {item} ordered"}},
                        "id": "call-message",
                    },
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def plugin() -> DeepAgentsPlugin:
    """crashtest's --plugin: the scripted model, built afresh in every process."""
    return DeepAgentsPlugin(
        model_provider=lambda name: ScriptedChatModel(), model_activity_options=MODEL_OPTIONS
    )


# Deep Agents passes an activity its tool call's arguments as one payload (an activity takes one
# positional argument): {"item", "quantity"}, {"to", "text"}.
@activity.defn
async def place_order(order: dict[str, Any]) -> str:
    """Order `order["quantity"]` of `order["item"]` from the grocer."""
    await take(f"order {order['quantity']} x {order['item']}", keyed=True)
    return f"ordered {order['quantity']} x {order['item']}"


@activity.defn
async def send_message(message: dict[str, str]) -> str:
    """Send `message["text"]` to `message["to"]`."""
    await take(f"message to {message['to']}: {message['text']}", keyed=True)
    return f"told {message['to']}"


@activity.defn(name="place_order_unkeyed")
async def place_order_unkeyed(order: dict[str, Any]) -> str:
    """Order `order["quantity"]` of `order["item"]` from the grocer."""
    await take(f"order {order['quantity']} x {order['item']}", keyed=False)
    return f"ordered {order['quantity']} x {order['item']}"


@activity.defn(name="send_message_unkeyed")
async def send_message_unkeyed(message: dict[str, str]) -> str:
    """Send `message["text"]` to `message["to"]`."""
    await take(f"message to {message['to']}: {message['text']}", keyed=False)
    return f"told {message['to']}"


async def _run(item: str, order: Any, tell: Any) -> str:
    agent = create_temporal_deep_agent(
        model=MODEL,
        tools=[
            activity_as_tool(
                order, name="place_order", start_to_close_timeout=TIMEOUT, retry_policy=RETRIES
            ),
            activity_as_tool(
                tell, name="send_message", start_to_close_timeout=TIMEOUT, retry_policy=RETRIES
            ),
        ],
    )
    result = await agent.ainvoke({"messages": [{"role": "user", "content": item}]})
    return str(result["messages"][-1].content)


@workflow.defn
class KeyedOrderAgent:
    @workflow.run
    async def run(self, item: str) -> str:
        return await _run(item, place_order, send_message)


@workflow.defn
class UnkeyedOrderAgent:
    @workflow.run
    async def run(self, item: str) -> str:
        return await _run(item, place_order_unkeyed, send_message_unkeyed)


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await framework_worker(
        client, task_queue, [KeyedOrderAgent], [place_order, send_message]
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await framework_worker(
        client, task_queue, [UnkeyedOrderAgent], [place_order_unkeyed, send_message_unkeyed]
    )
