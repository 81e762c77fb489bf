"""A pydantic-ai agent on Temporal (`TemporalDurability`, `PydanticAIPlugin`): its scripted model
(a `FunctionModel`, offline and deterministic) first asks for two tools in one response — place an
order and send a message, which pydantic-ai runs as two parallel activities — then answers.

    python -m temporal_crashtest run --plugin pydantic_ai.durable_exec.temporal:PydanticAIPlugin \\
        --worker examples.frameworks.pydantic_ai_agent:unkeyed_worker \\
        --workflow examples.frameworks.pydantic_ai_agent:UnkeyedOrderAgent --input '"milk"' \\
        --observe examples.frameworks.effects:effects_of

The plugin (on the client crashtest gives the factory) brings the data converter and registers
the agent's activities on the worker; the factory names only the workflow.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker
from temporalio.workflow import ActivityConfig

# pydantic-ai is passed through the sandbox by its plugin; our ledger (Postgres) is activity code.
with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from examples.frameworks.effects import MODEL_CALL, ensure_ledger, take


def _calls(messages: list[ModelMessage]) -> int:
    return sum(1 for m in messages if isinstance(m, ModelResponse)) + 1


async def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: order and tell, both at once; then say what was done."""
    await take(f"{MODEL_CALL} {_calls(messages)}", keyed=False)
    returned = [
        p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    if not returned:
        item = str(messages[0].parts[0].content) if messages else "milk"  # type: ignore[union-attr]
        return ModelResponse(
            parts=[
                ToolCallPart("place_order", {"item": item, "quantity": 2}),
                ToolCallPart("send_message", {"to": "sam", "text": f"2 x {item} ordered"}),
            ]
        )
    return ModelResponse(parts=[TextPart("; ".join(str(p.content) for p in returned))])


# pydantic-ai's default is a 60 s start-to-close timeout and no heartbeat timeout: a killed
# worker's activity would be noticed after a minute. Its activities are quick and do not
# heartbeat, so a 10 s heartbeat timeout notices it in 10 s and leaves a loaded machine room (2 s
# once timed out a live worker's model call); crashtest ends a killed worker's attempt at once
# anyway, unless --real-timeouts. Retries are bounded (they spend).
STICKY = timedelta(seconds=1)  # a dead worker's sticky queue is given up after 1 s, not 10 s
ACTIVITIES = ActivityConfig(
    start_to_close_timeout=timedelta(seconds=30),
    heartbeat_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
)


def make_agent(name: str, *, keyed: bool) -> Agent[None, str]:
    durability: TemporalDurability[None] = TemporalDurability(activity_config=ACTIVITIES)
    agent: Agent[None, str] = Agent(FunctionModel(script), name=name, capabilities=[durability])

    @agent.tool_plain
    async def place_order(item: str, quantity: int) -> str:
        await take(f"order {quantity} x {item}", keyed=keyed)
        return f"ordered {quantity} x {item}"

    @agent.tool_plain
    async def send_message(to: str, text: str) -> str:
        await take(f"message to {to}: {text}", keyed=keyed)
        return f"told {to}"

    return agent


keyed_agent = make_agent("keyed_grocer", keyed=True)
unkeyed_agent = make_agent("unkeyed_grocer", keyed=False)


@workflow.defn
class KeyedOrderAgent(PydanticAIWorkflow):
    __pydantic_ai_agents__ = (keyed_agent,)

    @workflow.run
    async def run(self, item: str) -> str:
        return (await keyed_agent.run(item)).output


@workflow.defn
class UnkeyedOrderAgent(PydanticAIWorkflow):
    __pydantic_ai_agents__ = (unkeyed_agent,)

    @workflow.run
    async def run(self, item: str) -> str:
        return (await unkeyed_agent.run(item)).output


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    """The plugin on `client` registers the agent's activities."""
    await ensure_ledger()
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[KeyedOrderAgent],
        sticky_queue_schedule_to_start_timeout=STICKY,
    )


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    await ensure_ledger()
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[UnkeyedOrderAgent],
        sticky_queue_schedule_to_start_timeout=STICKY,
    )
