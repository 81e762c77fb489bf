"""A Google ADK agent on Temporal (`temporalio-google-adk`: `GoogleAdkPlugin`, `TemporalModel`,
`activity_as_tool`): its model calls run as the plugin's `invoke_model` activity, and its two
tools are Temporal activities. The scripted model (an ADK `BaseLlm`, offline, answering from the
conversation it is given: never from a counter) asks for both tools in one turn, then answers.

    python -m temporal_crashtest run --plugin examples.frameworks.google_adk_agent:plugin \\
        --worker examples.frameworks.google_adk_agent:unkeyed_worker \\
        --workflow examples.frameworks.google_adk_agent:UnkeyedOrderAgent --input '"milk"' \\
        --observe examples.frameworks.effects:effects_of

The plugin function registers the scripted model with ADK's model registry (in each process, once)
and returns the plugin, which brings the model activity, the pydantic converter and the sandbox's
pass-throughs.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker
from temporalio.workflow import ActivityConfig

with workflow.unsafe.imports_passed_through():
    # The plugin imports ADK's auth handler as each worker is built; imported here, where the
    # worker module loads, crashtest's fork server holds it, and every worker it forks for a
    # cell starts with it (measured: half of each forked worker's CPU went to that import).
    import google.adk.auth.auth_handler  # noqa: F401
    from google.adk import Agent
    from google.adk.models import BaseLlm, LlmRequest, LlmResponse
    from google.adk.models.registry import LLMRegistry
    from google.adk.runners import InMemoryRunner
    from google.genai import types
    from temporalio.google_adk import GoogleAdkPlugin, TemporalModel
    from temporalio.google_adk.workflow import activity_as_tool

    from examples.frameworks.effects import (
        MODEL_CALL,
        framework_worker,
        place_order,
        place_order_unkeyed,
        send_message,
        send_message_unkeyed,
        take,
    )

MODEL = "scripted-grocer"
RETRIES = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5)
OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "heartbeat_timeout": timedelta(seconds=10),
    "retry_policy": RETRIES,
}
MODEL_ACTIVITY = ActivityConfig(
    start_to_close_timeout=timedelta(seconds=30),
    heartbeat_timeout=timedelta(seconds=10),
    retry_policy=RETRIES,
)


class ScriptedLlm(BaseLlm):
    """Order and tell in one turn; once both results are in, say what was done."""

    @classmethod
    def supported_models(cls) -> list[str]:
        return [MODEL]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = [p for c in llm_request.contents for p in (c.parts or [])]
        results = [p.function_response for p in parts if p.function_response]
        await take(f"{MODEL_CALL} {2 if results else 1}", keyed=False)  # a provider takes no key
        if results:
            said = "; ".join(str((r.response or {}).get("result", "")) for r in results)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=said)]))
            return
        item = next((p.text for p in parts if p.text), "milk")
        # The tools this agent offers, by name, as the request declares them to the model.
        declared = (llm_request.config.tools or []) if llm_request.config else []
        offered = [
            f.name
            for tool in declared
            for f in (getattr(tool, "function_declarations", None) or [])
            if f.name
        ] or list(llm_request.tools_dict)
        order = next(n for n in offered if n.startswith("place_order"))
        tell = next(n for n in offered if n.startswith("send_message"))
        calls = [
            types.FunctionCall(id="call-order", name=order, args={"item": item, "quantity": 2}),
            types.FunctionCall(
                id="call-message", name=tell, args={"to": "sam", "text": f"2 x {item} ordered"}
            ),
        ]
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(function_call=c) for c in calls])
        )


def plugin() -> GoogleAdkPlugin:
    """crashtest's --plugin: the scripted model registered with ADK, and the plugin."""
    LLMRegistry.register(ScriptedLlm)
    return GoogleAdkPlugin()


async def _run(item: str, order: Any, tell: Any) -> str:
    agent = Agent(
        name="grocer",
        model=TemporalModel(MODEL, activity_config=MODEL_ACTIVITY),
        tools=[activity_as_tool(order, **OPTIONS), activity_as_tool(tell, **OPTIONS)],
    )
    runner = InMemoryRunner(agent=agent, app_name="grocer")
    session = await runner.session_service.create_session(app_name="grocer", user_id="sam")
    answer = ""
    message = types.Content(role="user", parts=[types.Part(text=item)])
    async for event in runner.run_async(user_id="sam", session_id=session.id, new_message=message):
        if event.is_final_response() and event.content and event.content.parts:
            answer = "".join(p.text or "" for p in event.content.parts)
    return answer


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
