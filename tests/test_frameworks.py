"""crashtest on agents built with the agent frameworks' Temporal integrations, through their own
client plugins (`--plugin`): a pydantic-ai agent, an OpenAI Agents SDK agent, a Strands agent, a
Deep Agent, a Google ADK agent and a LangGraph graph, each placing an
order and sending a message with tools the model asks for together (run as parallel
activities). Unkeyed tools are caught at exactly the tool-call cells, keyed ones are clean, and a
crash after a model activity returned pays for the model call again in both.

Two of them also send their effects to a local HTTP service, and are crash-tested with
crashtest's HTTP observer (`--http`) beside the hand-written one: the same verdicts point by
point, and a secret planted in a header and in the query string found in no output. (The
recorder, library by library, is tested in crashtest/tests/test_http.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.db import ensure_database_url
from tests.effects_service import EffectsService, effects_service
from tests.helpers import (
    MODULE_BUDGET_S,
    BothWays,
    CrashtestRun,
    child_env,
    failing,
    prepare_database,
    racing,
    run_both_ways,
    untested_but_the_end,
)

# The module's crash tests run once, in the first test's setup (`MODULE_BUDGET_S`).
pytestmark = pytest.mark.timeout(MODULE_BUDGET_S)

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


# Grouped as well as --exact: the framework whose tools share an activity (each tool's effect a
# point inside it). That grouping gives --exact's verdicts is the crash tool's own claim, tested
# shape by shape in test_crashtest_shapes.py (parallel activities, effects sharing an activity);
# every framework running both ways (26 crash tests, 155 s of a 13-minute suite) proved it five
# times over, and pydantic-ai's parallel tools both ways (21 CPU s) once more than the shapes.
GROUPED_TOO = {"langgraph-keyed", "langgraph-unkeyed"}
# Grouped only: the keyed runs whose test asks only that every point passes (a grouped ✓ is the
# default's answer, and a group that differs is split down to single points, so a ✗ would still
# be said point by point). A run per point (--exact) took each of these 9 to 15 whole runs of a
# heavy agent (an ADK or Deep Agents workflow task builds its graph) once every activity's
# effects became points too.
GROUPED_ONLY = frozenset(
    {"pydantic-ai-keyed", "strands-keyed", "deepagents-keyed", "google-adk-keyed"}
)


# Four at a time failed a Google ADK reference run beside two busy loops: its workflow task ran
# over the SDK's 2 s deadlock detector on every attempt (a clean-clone check of this suite).
FRAMEWORKS_AT_ONCE = 2


# The crash tests run with the HTTP observer as well: the agents' tools and model calls also go
# to the local HTTP service, with a bearer token and a key in the query string planted. The
# keyed one counts the model calls by hand too: its tools are clean, its model calls paid again.
HTTP_COMPARED = ("pydantic-ai-unkeyed", "openai-agents-unkeyed", "openai-agents-keyed")
CALLS_COUNTED = {"openai-agents-keyed"}  # the keyed runs that count the model calls
HEADER_SECRET = "sk-planted-header-secret-4242"
QUERY_SECRET = "planted-query-secret-4242"
HTTP_LOG = "http-requests.jsonl"  # where the README says the records are, in --logs


@pytest.fixture(scope="module")
def service() -> Iterator[EffectsService]:
    with effects_service() as running:
        yield running


def with_http(
    runs: dict[str, tuple[list[str], dict[str, str]]], service: EffectsService, out: Path
) -> None:
    """HTTP_COMPARED's runs observed by the HTTP observer too: the tools' requests (a keyed one
    counted once however often sent) and the model calls, paid calls (counted by hand too)."""
    for variant in HTTP_COMPARED:
        args, _ = runs[variant]
        calls = MODEL_CALLS if variant in CALLS_COUNTED else []
        http = ["--http", service.netloc, "--http-paid", f"{service.netloc}/v1/"]
        logs = ["--logs", str(out / f"{variant}-logs")]
        sends = {
            "EFFECTS_URL": f"http://{service.netloc}/?api_key={QUERY_SECRET}",
            "EFFECTS_TOKEN": HEADER_SECRET,
        }
        runs[variant] = ([*args, *calls, *http, *logs], sends)


@pytest.fixture(scope="module")
def frameworks(
    temporal_address: str, service: EffectsService, tmp_path_factory: pytest.TempPathFactory
) -> BothWays:
    """Every framework's crash tests --exact but GROUPED_ONLY's, and GROUPED_TOO grouped as
    well (15), two at a time, the next as one ends: the frameworks' workflow code is heavy on
    CPU (a Deep Agent's graph is built in its workflow task), and 2 cores running every run at
    once fail workflow tasks in the SDK's 2 s deadlock detector, as no production worker would.
    HTTP_COMPARED's with the HTTP observer too. Run once for the tests below."""
    env = child_env(prepare_database(ensure_database_url()), TEMPORAL_ADDRESS=temporal_address)
    runs: dict[str, tuple[list[str], dict[str, str]]] = {n: (a, {}) for n, a in RUNS.items()}
    out = tmp_path_factory.mktemp("frameworks")
    with_http(runs, service, out)
    return run_both_ways(
        runs,
        env,
        out,
        at_once=FRAMEWORKS_AT_ONCE,
        grouped_too=GROUPED_TOO,
        grouped_only=GROUPED_ONLY,
    )


def hand_written(state: Any) -> Any:
    """The hand-written observer's view in a state (the HTTP observer's beside it, or alone)."""
    return state["observe"] if isinstance(state, dict) and "http" in state else state


# Each framework's activities: its model's, then the two tools, the model asked for together;
# the second model call named by what is new in its input (the tools' results; the OpenAI Agents
# SDK's, the tool call's arguments), the first by nothing (its input is in every later call).
TOOL_RESULTS = " (2 x milk ordered ordere…)"
MODEL_POINTS = {"after-effect:1", "after-effect:4"}  # after each model activity returned
# Inside each activity, after each of its effects: the ledger's row committed first (a model
# call's record, a tool's effect), then, observed over HTTP (HTTP_COMPARED), its request. Killed
# there, the call is paid again, an unkeyed tool's effect made again.
MODEL_RECORDS = {"effect:1.1", "effect:4.1"}
TOOL_RECORDS = {"effect:2.1", "effect:3.1"}
MODEL_EFFECTS = {"effect:1.2", "effect:4.2"}
TOOL_EFFECTS = {"effect:2.2", "effect:3.2"}
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
    calls_counted = f"{framework}-keyed" in CALLS_COUNTED
    assert done.returncode == calls_counted, done.stdout + done.stderr
    expected = [f"{model}#1", order, tell, f"{model}#2{second}"]
    assert labels(frameworks[f"{framework}-keyed"]) == expected
    assert hand_written(report["reference"])["effects"] == TOOLS["effects"]
    # The tools are clean; a model call is paid again after its activity returned, keyed or not.
    http = MODEL_EFFECTS if f"{framework}-keyed" in HTTP_COMPARED else set()
    paid = MODEL_POINTS | MODEL_RECORDS | http
    assert failing(report) == (paid if calls_counted else set())
    assert untested_but_the_end(report) == []

    done, report = frameworks[f"{framework}-unkeyed"]
    assert done.returncode == 1, done.stdout + done.stderr
    diffs = {c["crash_at"]: c["diff"] for c in report["cells"] if not c["matches"]}
    # The tools' effects repeat at the two tool calls, and may at a checkpoint between them: the
    # model asked for both at once, so when the workflow has seen one call's result the other
    # may have run and not yet been reported — a real repeat, which crashtest shows. The model
    # calls repeat after either model activity (the first and the last boundary), keys or not.
    over_http = f"{framework}-unkeyed" in HTTP_COMPARED
    calls = (
        {"after-effect:2", "after-effect:3"} | TOOL_RECORDS | (TOOL_EFFECTS if over_http else set())
    )
    tools = {p for p, d in diffs.items() if "effects" in d}
    assert calls <= tools
    assert all(p.startswith("after-checkpoint:") for p in tools - calls)
    model_calls = {p for p, d in diffs.items() if "model_calls: 2 → 3" in d}
    assert model_calls == MODEL_POINTS | MODEL_RECORDS | (MODEL_EFFECTS if over_http else set())


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
    # The tools node: both tools again, killed after it returned or after either tool's record.
    assert failing(report) == {"after-effect:2", "effect:2.1", "effect:2.2"}


def each_view(run: CrashtestRun, name: str) -> dict[str, bool]:
    """At each crash point, whether observer `name`'s view of the run's end is its view of the
    run without a crash (the state of several observers holds each one's view by name)."""
    _, report = run
    reference = report["reference"][name]
    return {
        c["crash_at"]: isinstance(c["observed"], dict) and c["observed"].get(name) == reference
        for c in report["cells"]
    }


def test_the_http_observer_gives_the_hand_written_verdicts(
    frameworks: BothWays, service: EffectsService
) -> None:
    """At each point of HTTP_COMPARED's crash tests, the HTTP requests' view and the hand-written
    observer's differ from their reference views alike (but for a point failed in a race with a
    parallel sibling, and a kill between the ledger's row and the request); and neither planted
    secret is in any output, report or record."""
    assert service.received["POST /effects"] and service.received["POST /v1/chat/completions"]
    table = {}
    for variant in HTTP_COMPARED:
        run = frameworks.exact[variant]
        by_http, by_observer = each_view(run, "http"), each_view(run, "observe")
        table[variant] = {"http": by_http, "observe": by_observer}
        assert by_http and by_http.keys() == by_observer.keys(), run[0].stderr
        differ = {p for p in by_http if by_http[p] != by_observer[p]}
        # Killed between an activity's two effects — its ledger row committed (its effect 1),
        # its request not yet sent — the row repeats and the request does not: the hand-written
        # observer sees the repeat, the HTTP one cannot. Everywhere else the two agree.
        between = {
            p
            for p in differ
            if p.startswith("effect:") and p.endswith(".1") and by_http[p] and not by_observer[p]
        }
        assert not differ - between - racing(run, differ), table[variant]
        # Some points are caught (the model calls, and the unkeyed tools), and some not.
        assert any(by_http.values()) and not all(by_http.values()), table[variant]
    print(json.dumps(table, indent=1))

    for variant in HTTP_COMPARED:
        done, report = frameworks.exact[variant]
        texts = [done.stdout, done.stderr, json.dumps(report)]
        args = list(done.args)
        log = Path(args[args.index("--logs") + 1]) / HTTP_LOG
        assert log.exists(), variant
        texts.append(log.read_text())
        for text in texts:
            assert HEADER_SECRET not in text and QUERY_SECRET not in text, variant
