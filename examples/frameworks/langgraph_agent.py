"""A LangGraph agent on Temporal (`temporalio-langgraph`: `LangGraphPlugin`, `graph`): a `plan`
node (the model) and a `tools` node, each a Temporal activity, looping until the model answers.
The scripted model (offline, deterministic, answering from the graph's state: never from a
counter) asks for two tools in one turn — place an order, send a message — and LangGraph's
tools node runs both **in one activity**.

That is where the usual key recipe loses an effect: with one key per activity
(`{workflow_id}:{activity_id}`) the message is dropped as a "duplicate" of the order in every
run, the reference included. So the graphs here differ only in their tools' keys:

- `keyed`: one key per effect, the tool call's own id (`{workflow_id}:{tool_call_id}`) — clean;
- `per_activity`: the activity's key for both effects — loses the message; crashtest with
  `--expect` (both effects) says the reference already differs;
- `unkeyed`: no key — caught at the tools node.

    python -m temporal_crashtest run --plugin examples.frameworks.langgraph_agent:plugin \\
        --worker examples.frameworks.langgraph_agent:keyed_worker \\
        --workflow examples.frameworks.langgraph_agent:KeyedOrderAgent --input '"milk"' \\
        --observe examples.frameworks.effects:effects_of
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypedDict

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from langgraph.graph import END, START, StateGraph
    from temporalio.langgraph import LangGraphPlugin, graph

    from examples.frameworks.effects import MODEL_CALL, framework_worker
    from examples.shapes.ledger import record_on, workflow_key
    from infra.db import connect_postgres, ensure_database_url

# As the other frameworks' examples: a killed worker's activity is noticed in 10 s (crashtest
# ends its attempt at once anyway), retries bounded (they spend).
IN_AN_ACTIVITY = {
    "execute_in": "activity",
    "start_to_close_timeout": timedelta(seconds=30),
    "heartbeat_timeout": timedelta(seconds=10),
    "retry_policy": RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
}


class State(TypedDict):
    item: str
    calls: list[dict[str, Any]]  # the model's tool calls of this turn: {"id", "name", "args"}
    results: list[str]  # every tool result so far
    answer: str


async def take(what: str, key: str | None) -> None:
    async with await connect_postgres(ensure_database_url()) as conn:
        await record_on(conn, what, key)


async def plan(state: State) -> dict[str, Any]:
    """The model: order and tell, both in one turn; once their results are in, answer."""
    turn = 2 if state["results"] else 1
    await take(f"{MODEL_CALL} {turn}", None)  # a provider takes no key
    if state["results"]:
        return {"calls": [], "answer": "; ".join(state["results"])}
    item = state["item"]
    return {
        "calls": [
            {"id": "call-order", "name": "place_order", "args": {"item": item, "quantity": 2}},
            {
                "id": "call-message",
                "name": "send_message",
                "args": {"to": "sam", "text": f"2 x {item} ordered"},
            },
        ],
    }


def _effect(call: dict[str, Any]) -> tuple[str, str]:
    args = call["args"]
    if call["name"] == "place_order":
        return f"order {args['quantity']} x {args['item']}", f"ordered {args['quantity']}"
    return f"message to {args['to']}: {args['text']}", f"told {args['to']}"


async def _tools(state: State, key_of: str) -> dict[str, Any]:
    """Every tool call of the turn, in one activity, keyed as `key_of` says."""
    results = list(state["results"])
    for call in state["calls"]:
        effect, result = _effect(call)
        key = {
            "call": f"{activity.info().workflow_id}:{call['id']}",  # one key per effect
            "activity": workflow_key(),  # one per activity: the second effect is lost
            "none": None,
        }[key_of]
        await take(effect, key)
        results.append(result)
    return {"calls": [], "results": results}


# The tools nodes, at module level as the plugin requires of a node it runs as an activity.
async def tools_keyed(state: State) -> dict[str, Any]:
    return await _tools(state, "call")


async def tools_per_activity(state: State) -> dict[str, Any]:
    return await _tools(state, "activity")


async def tools_unkeyed(state: State) -> dict[str, Any]:
    return await _tools(state, "none")


async def route(state: State) -> str:
    """After the model: its tool calls, or the end. Async: the workflow runs no thread."""
    return "tools" if state["calls"] else END


def build(tools: Any) -> StateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("plan", plan, metadata=IN_AN_ACTIVITY)
    builder.add_node("tools", tools, metadata=IN_AN_ACTIVITY)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", route)
    builder.add_edge("tools", "plan")
    return builder


GRAPHS = {"keyed": tools_keyed, "per_activity": tools_per_activity, "unkeyed": tools_unkeyed}


def plugin() -> LangGraphPlugin:
    """crashtest's --plugin: the graphs, built afresh (the plugin rewrites what it is given)."""
    return LangGraphPlugin(graphs={name: build(tools) for name, tools in GRAPHS.items()})


async def _run(name: str, item: str) -> str:
    app = graph(name).compile()
    out = await app.ainvoke({"item": item, "calls": [], "results": [], "answer": ""})
    return str(out["answer"])


@workflow.defn
class KeyedOrderAgent:
    @workflow.run
    async def run(self, item: str) -> str:
        return await _run("keyed", item)


@workflow.defn
class PerActivityOrderAgent:
    @workflow.run
    async def run(self, item: str) -> str:
        return await _run("per_activity", item)


@workflow.defn
class UnkeyedOrderAgent:
    @workflow.run
    async def run(self, item: str) -> str:
        return await _run("unkeyed", item)


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await framework_worker(client, task_queue, [KeyedOrderAgent])


async def per_activity_worker(client: Client, task_queue: str) -> Worker:
    return await framework_worker(client, task_queue, [PerActivityOrderAgent])


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await framework_worker(client, task_queue, [UnkeyedOrderAgent])
