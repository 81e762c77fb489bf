"""crashtest's HTTP observer (`--http`) on the framework agents, whose tools and model calls also
send their effects to a local HTTP service: the same verdicts as their hand-written observers,
point by point, and a secret planted in a header and in the query string found in no output.
Its recorder, library by library, is tested in crashtest/tests/test_http.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.db import ensure_database_url
from tests.effects_service import EffectsService, effects_service
from tests.helpers import (
    CrashtestRun,
    child_env,
    crashtest_runs,
    prepare_database,
    racing,
)
from tests.test_frameworks import FRAMEWORKS, agent

LOG_NAME = "http-requests.jsonl"  # where the README says the records are, in --logs

HEADER_SECRET = "sk-planted-header-secret-4242"
QUERY_SECRET = "planted-query-secret-4242"


@pytest.fixture
def service() -> Iterator[EffectsService]:
    with effects_service() as running:
        yield running


# The framework agents whose tools run in activities of their own; the hand-written observer
# counts the model calls too, as the HTTP observer counts paid calls.
COMPARED = ("pydantic-ai", "openai-agents")
HAND_WRITTEN = ["--observe", "examples.frameworks.effects:effects_and_model_calls_of"]


def each_view(run: CrashtestRun, name: str) -> dict[str, bool]:
    """At each crash point, whether observer `name`'s view of the run's end is its view of the
    run without a crash (the state of several observers holds each one's view by name)."""
    _, report = run
    reference = report["reference"][name]
    return {
        c["crash_at"]: isinstance(c["observed"], dict) and c["observed"].get(name) == reference
        for c in report["cells"]
    }


def test_the_framework_agents_get_the_same_verdicts(
    temporal_address: str, service: EffectsService, tmp_path: Path
) -> None:
    """Each agent crash-tested once with both observers: at each point, the HTTP requests'
    view and the hand-written observer's must differ from their reference views alike."""
    http = ["--http", service.netloc, "--http-paid", f"{service.netloc}/v1/"]
    runs: dict[str, tuple[list[str], dict[str, str]]] = {}
    for name in COMPARED:
        module, plugin = FRAMEWORKS[name]
        for keyed in (True, False):
            args = agent(module, plugin, keyed)
            at = args.index("--observe")
            without = args[:at] + args[at + 2 :]
            variant = f"{name}-{'keyed' if keyed else 'unkeyed'}"
            logs = tmp_path / f"{variant}-logs"
            runs[variant] = ([*without, *HAND_WRITTEN, *http, "--logs", str(logs)], {})
    env = child_env(
        prepare_database(ensure_database_url()),
        TEMPORAL_ADDRESS=temporal_address,
        EFFECTS_URL=f"http://{service.netloc}/?api_key={QUERY_SECRET}",
        EFFECTS_TOKEN=HEADER_SECRET,
    )
    results = crashtest_runs(runs, env, tmp_path, at_once=4)
    assert service.received["POST /effects"] and service.received["POST /v1/chat/completions"]

    table = {}
    for variant, run in results.items():
        by_http, by_observer = each_view(run, "http"), each_view(run, "observe")
        table[variant] = {"http": by_http, "observe": by_observer}
        assert by_http and by_http.keys() == by_observer.keys(), run[0].stderr
        differ = {p for p in by_http if by_http[p] != by_observer[p]}
        assert not differ - racing(run, differ), table[variant]
    # The unkeyed tools and the model calls are caught; keyed tools are not.
    for name in COMPARED:
        assert not all(table[f"{name}-unkeyed"]["http"].values())
        assert any(table[f"{name}-keyed"]["http"].values())
    print(json.dumps(table, indent=1))

    for run_name, (done, report) in results.items():
        texts = [done.stdout, done.stderr, json.dumps(report)]
        log = tmp_path / f"{run_name}-logs" / LOG_NAME
        assert log.exists(), run_name
        texts.append(log.read_text())
        for text in texts:
            assert HEADER_SECRET not in text and QUERY_SECRET not in text, run_name
