"""crashtest on agents built with the agent frameworks' Temporal integrations, through their own
client plugins (`--plugin`): a pydantic-ai agent, an OpenAI Agents SDK agent, a Strands agent, a
Deep Agent, a Google ADK agent and a LangGraph graph, each placing an
order and sending a message with tools the model asks for together (run as parallel
activities). Unkeyed tools are caught at exactly the tool-call cells, keyed ones are clean, and a
crash after a model activity returned pays for the model call again in both."""

from __future__ import annotations

import pytest

from infra.db import ensure_database_url
from tests.helpers import (
    BothWays,
    CrashtestRun,
    child_env,
    failing,
    prepare_database,
    run_both_ways,
    untested_but_the_end,
)

# The first test sets up the module's crash tests: 157 s here, more on a loaded machine.
pytestmark = pytest.mark.timeout(600)

PYDANTIC_AI = "pydantic_ai.durable_exec.temporal:PydanticAIPlugin"
OPENAI_AGENTS = "examples.frameworks.openai_agents_agent:plugin"
STRANDS = "examples.frameworks.strands_agent:plugin"
DEEPAGENTS = "examples.frameworks.deepagents_agent:plugin"
GOOGLE_ADK = "examples.frameworks.google_adk_agent:plugin"
TOOLS = {"effects": ["message to sam: 2 x milk ordered", "order 2 x milk"]}


def agent(module: str, plugin: str, keyed: bool, *more: str) -> list[str]:
    variant = "keyed" if keyed else "unkeyed"
    return [
        "--plugin", plugin,
        "--worker", f"examples.frameworks.{module}:{variant}_worker",
        "--workflow", f"examples.frameworks.{module}:{variant.capitalize()}OrderAgent",
        "--input", '"milk"', "--jobs", "4",
        "--observe", "examples.frameworks.effects:effects_of", *more,
    ]  # fmt: skip


FRAMEWORKS = {
    "pydantic-ai": ("pydantic_ai_agent", PYDANTIC_AI),
    "openai-agents": ("openai_agents_agent", OPENAI_AGENTS),
    "strands": ("strands_agent", STRANDS),
    "deepagents": ("deepagents_agent", DEEPAGENTS),
    "google-adk": ("google_adk_agent", GOOGLE_ADK),
}
# The unkeyed runs count the model calls too (a crash after a model activity returned pays for
# the call again, keys or not); the keyed runs observe the tools' effects only.
MODEL_CALLS = ["--observe", "examples.frameworks.effects:effects_and_model_calls_of"]
RUNS = {
    run: args
    for name, (module, plugin) in FRAMEWORKS.items()
    for run, args in [
        (f"{name}-keyed", agent(module, plugin, True)),
        (f"{name}-unkeyed", agent(module, plugin, False, *MODEL_CALLS)),
    ]
}
# LangGraph's tools node runs every tool call of a turn in one activity: keyed per tool call (the
# call's id), keyed per activity (the recipe that loses the second effect), unkeyed.
LANGGRAPH = "examples.frameworks.langgraph_agent"
EXPECT = ["--expect", '{"effects": ["message to sam: 2 x milk ordered", "order 2 x milk"]}']
for variant, factory in [("Keyed", "keyed"), ("PerActivity", "per_activity"),
                         ("Unkeyed", "unkeyed")]:  # fmt: skip
    RUNS[f"langgraph-{factory}"] = [
        "--plugin", f"{LANGGRAPH}:plugin", "--worker", f"{LANGGRAPH}:{factory}_worker",
        "--workflow", f"{LANGGRAPH}:{variant}OrderAgent", "--input", '"milk"', "--jobs", "4",
        "--observe", "examples.frameworks.effects:effects_of", *EXPECT,
    ]  # fmt: skip


def labels(run: CrashtestRun) -> list[str]:
    return list(run[1]["activities"])


# Grouped as well as --exact: one framework whose tools run as parallel activities, and the one
# whose tools share an activity. That grouping gives --exact's verdicts is the crash tool's own
# claim, tested shape by shape in test_crashtest_shapes.py; every framework running both ways
# (26 crash tests, 155 s of a 13-minute suite) proved it five times over.
GROUPED_TOO = {"pydantic-ai-keyed", "pydantic-ai-unkeyed", "langgraph-keyed", "langgraph-unkeyed"}


# Four at a time failed a Google ADK reference run beside two busy loops: its workflow task ran
# over the SDK's 2 s deadlock detector on every attempt (a clean-clone check of this suite).
FRAMEWORKS_AT_ONCE = 2


@pytest.fixture(scope="module")
def frameworks(temporal_address: str, tmp_path_factory: pytest.TempPathFactory) -> BothWays:
    """Every framework's crash tests --exact, and GROUPED_TOO grouped as well (17), two at a
    time, the next as one ends: the frameworks' workflow code is heavy on CPU (a Deep Agent's
    graph is built in its workflow task), and 2 cores running every run at once fail workflow
    tasks in the SDK's 2 s deadlock detector, as no production worker would. Run once for the
    tests below."""
    env = child_env(prepare_database(ensure_database_url()), TEMPORAL_ADDRESS=temporal_address)
    runs: dict[str, tuple[list[str], dict[str, str]]] = {n: (a, {}) for n, a in RUNS.items()}
    out = tmp_path_factory.mktemp("frameworks")
    return run_both_ways(runs, env, out, at_once=FRAMEWORKS_AT_ONCE, grouped_too=GROUPED_TOO)


# Each framework's activities: its model's, then the two tools, the model asked for together;
# the second model call named by what is new in its input (the tools' results; the OpenAI Agents
# SDK's, the tool call's arguments), the first by nothing (its input is in every later call).
TOOL_RESULTS = " (2 x milk ordered ordere…)"
ACTIVITIES = {
    "pydantic-ai": ("agent__keyed_grocer__model_request",
                    "agent__keyed_grocer__toolset__<agent>__call_tool#1 (place_order milk)",
                    "agent__keyed_grocer__toolset__<agent>__call_tool#2 (send_message sam)",
                    TOOL_RESULTS),
    "openai-agents": ("invoke_model_activity", "place_order", "send_message",
                      ' ({"item": "milk", "quant…)'),
    "strands": ("invoke_model", "place_order", "send_message", TOOL_RESULTS),
    "deepagents": ("deepagents.invoke_model", "place_order", "send_message", TOOL_RESULTS),
    "google-adk": ("invoke_model", "place_order", "send_message", TOOL_RESULTS),
}  # fmt: skip


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_keyed_tools_are_clean_and_unkeyed_ones_caught(
    frameworks: BothWays, framework: str
) -> None:
    if grouped := sorted(GROUPED_TOO & {f"{framework}-keyed", f"{framework}-unkeyed"}):
        frameworks.assert_agree(*grouped)
    model, order, tell, second = ACTIVITIES[framework]
    done, report = frameworks[f"{framework}-keyed"]
    assert done.returncode == 0, done.stdout + done.stderr
    expected = [f"{model}#1", order, tell, f"{model}#2{second}"]
    assert labels(frameworks[f"{framework}-keyed"]) == expected
    assert report["reference"] == TOOLS and not failing(report)
    assert untested_but_the_end(report) == []

    done, report = frameworks[f"{framework}-unkeyed"]
    assert done.returncode == 1, done.stdout + done.stderr
    diffs = {c["crash_at"]: c["diff"] for c in report["cells"] if not c["matches"]}
    # The tools' effects repeat at the two tool calls, and may at a checkpoint between them: the
    # model asked for both at once, so when the workflow has seen one call's result the other
    # may have run and not yet been reported — a real repeat, which crashtest shows. The model
    # calls repeat after either model activity (the first and the last boundary), keys or not.
    calls = {"after-effect:2", "after-effect:3"}
    tools = {p for p, d in diffs.items() if "effects" in d}
    assert calls <= tools
    assert all(p.startswith("after-checkpoint:") for p in tools - calls)
    model_calls = {p for p, d in diffs.items() if "model_calls: 2 → 3" in d}
    assert model_calls == {"after-effect:1", "after-effect:4"}


def test_langgraph_tools_in_one_activity(frameworks: BothWays) -> None:
    """LangGraph's tools node runs both tool calls in one activity."""
    frameworks.assert_agree("langgraph-keyed", "langgraph-unkeyed")
    done, report = frameworks["langgraph-keyed"]
    assert done.returncode == 0, done.stderr
    assert report["activities"] == [
        "keyed.plan#1",
        "keyed.tools",
        "keyed.plan#2 (ordered 2 told sam)",
    ]
    assert report["reference"] == TOOLS and not failing(report)
    # One key per activity drops the message as a duplicate of the order, in the reference
    # itself: every cell would "match" it; --expect says so before any cell runs.
    done, report = frameworks["langgraph-per_activity"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert report["cells"] == [] and report["expect_diff"] == "effects: 2 → 1 entries"
    done, report = frameworks["langgraph-unkeyed"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert failing(report) == {"after-effect:2"}  # the tools node: both tools again
