"""The payments example and the order agent written in TypeScript (examples/typescript/src:
payments.ts, the same workflow, activity names, options and Postgres tables as
examples/payments; src/agent.ts and OrderAgent, examples/order_agent.py's, its model a local
OpenAI-compatible stub, examples/model_stub.py; and AiSdkOrderAgent, the same agent on the AI
SDK through @temporalio/ai-sdk, src/ai-sdk-agent.ts), crash-tested as worker commands on the wire
and observed by the same Python observers as the Python versions: the same tables of verdicts as
the Python workers killed in process, at every point a kill on the wire makes. Skipped, in one
line, where node is missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from examples.model_stub import serving
from tests.helpers import (
    MODULE_BUDGET_S,
    PAYMENTS_INPUT,
    ROOT,
    CrashtestRun,
    child_env,
    crashtest_runs,
    failing,
    payments,
)

# Its crash tests run in module fixtures: 106 s quiet, past the default 300 s beside busy loops.
pytestmark = [pytest.mark.servers, pytest.mark.timeout(MODULE_BUDGET_S)]
# Few cells at a time (--jobs): each starts its worker commands afresh (~0.5 s of CPU each), and
# many at once starve the rest of the suite on a loaded machine.

WORKER_JS = ROOT / "examples" / "typescript" / "lib" / "worker.js"
TYPESCRIPT = [
    "--worker-cmd", f"node {WORKER_JS}",
    "--workflow", "PaymentsWorkflow",
    "--input", PAYMENTS_INPUT,
    "--observe", "examples.payments.observe:payments_of", "--jobs", "3",
]  # fmt: skip
ON_THE_WIRE = ["--points", "after-effect,after-checkpoint"]  # in-task: test_worker_command.py
KEYED = {"PAYMENTS_KEYED": "1"}  # each charge keyed, as examples.payments.worker:keyed_worker
CHARGES = {"after-effect:2", "after-effect:3", "after-effect:4"}


AGENT = [
    "--input", '"milk"', "--points", "after-effect", "--jobs", "2",
    "--observe", "examples.frameworks.effects:effects_and_model_calls_of",
]  # fmt: skip
AI_SDK_WORKER_JS = WORKER_JS.with_name("ai-sdk-worker.js")
AGENTS = {
    "typescript": ["--worker-cmd", f"node {WORKER_JS}", "--workflow", "OrderAgent", *AGENT],
    "ai-sdk": [
        "--worker-cmd", f"node {AI_SDK_WORKER_JS}", "--workflow", "AiSdkOrderAgent", *AGENT,
    ],
    "python": [
        "--worker", "examples.order_agent:worker",
        "--workflow", "examples.order_agent:OrderAgent", *AGENT,
    ],
}  # fmt: skip
AGENT_KEYED = {"AGENT_KEYED": "1"}  # each tool's effect keyed (the model calls never are)


def verdicts(report: dict[str, object]) -> dict[str, bool]:
    cells = report["cells"]
    assert isinstance(cells, list)
    return {c["crash_at"]: c["matches"] for c in cells}


# Temporal's saga sample in TypeScript (src/saga.ts, examples/shapes/saga.py's OpenAccount): the
# bank account's points, at its last failed attempt and once the workflow saw it fail.
SAGA = [
    "--worker-cmd", f"node {WORKER_JS}", "--workflow", "OpenAccount", "--input", '"acme"',
    "--observe", "examples.shapes.ledger:effects_of",
    "--points", "after-effect:3,after-checkpoint:3",
]  # fmt: skip


@pytest.fixture(scope="module")
def runs(
    db_url: str, temporal_address: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, CrashtestRun]:
    """The payments both ways and keyed, and the saga, at once."""
    if shutil.which("node") is None:
        pytest.skip("node is missing: the TypeScript worker cannot run here")
    assert WORKER_JS.exists(), "build it: make typescript"
    env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address)
    return crashtest_runs(
        {
            "typescript": ([*TYPESCRIPT, *ON_THE_WIRE], {}),
            "python": ([*payments("unkeyed_worker"), *ON_THE_WIRE], {}),
            "typescript-keyed": ([*TYPESCRIPT, "--points", ",".join(sorted(CHARGES))], KEYED),
            "saga": (SAGA, {}),
        },
        env,
        tmp_path_factory.mktemp("typescript"),
    )


def test_the_saga_samples_failing_step_is_reached_on_the_wire(
    runs: dict[str, CrashtestRun],
) -> None:
    """`add_bank_account` fails on every attempt until its schedule-to-close window closes: its
    point after its effect is its last failure, which the wire took for no end at all (only a
    policy's last attempt was one), so the point was ✗ "never reached"; now it is reached, and
    ✓, as in process (tests/test_crashtest_shapes.py)."""
    done, report = runs["saga"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdicts(report) == {"after-effect:3": True, "after-checkpoint:3": True}
    assert report["reference_end"] == "failed: ApplicationError: add bank account failed for acme"
    assert report["reference"] == {
        "effects": [
            "address of acme",
            "client of acme",
            "undo client of acme",
            "undo address of acme",
        ]
    }


def test_payments_in_typescript_get_the_python_verdicts(runs: dict[str, CrashtestRun]) -> None:
    """Unkeyed, the charges fail after their effect, in either language, and nothing else does;
    keyed (PAYMENTS_KEYED=1, as `keyed_worker`), no charge does (the other points pass unkeyed:
    no effect repeats there, key or none)."""
    results = runs
    (ts_done, ts), (py_done, py) = results["typescript"], results["python"]
    assert ts_done.returncode == 1, ts_done.stdout + ts_done.stderr
    assert py_done.returncode == 1, py_done.stdout + py_done.stderr
    assert ts["activities"] == py["activities"]  # the same labels, read from either history
    assert verdicts(ts) == verdicts(py)
    assert failing(ts) == CHARGES
    assert {c["diff"] for c in ts["cells"] if not c["matches"]} == {"charges: 3 → 4 entries"}
    assert ts["reference"] == py["reference"]

    done, keyed = results["typescript-keyed"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert failing(keyed) == set() and {c["crash_at"] for c in keyed["cells"]} == CHARGES


def test_the_order_agent_in_typescript_gets_the_python_verdicts(
    db_url: str, temporal_address: str, tmp_path: Path
) -> None:
    """Keyed (each tool's effect; a provider takes no key), the points after the model calls
    fail in either language — each call paid again — and those after the tools pass; the same
    labels, the same verdicts. The same agent on the AI SDK (`@temporalio/ai-sdk`: the model
    call its activity `invokeModel`, the tools run at once) gets the same verdicts. (Unkeyed,
    every point fails: the frameworks' tests show it.)"""
    if shutil.which("node") is None:
        pytest.skip("node is missing: the TypeScript worker cannot run here")
    assert WORKER_JS.exists(), "build it: make typescript"
    with serving() as model:
        env = child_env(db_url, TEMPORAL_ADDRESS=temporal_address, MODEL_URL=model)
        runs = {language: (args, AGENT_KEYED) for language, args in AGENTS.items()}
        results = crashtest_runs(runs, env, tmp_path)
    (ts_done, ts), (py_done, py) = results["typescript"], results["python"]
    ai_done, ai = results["ai-sdk"]
    for done in (ts_done, py_done, ai_done):
        assert done.returncode == 1, done.stdout + done.stderr
    assert ts["activities"] == py["activities"]
    assert ai["activities"][1:3] == py["activities"][1:3] == ["place_order", "send_message"]
    assert verdicts(ts) == verdicts(py) == verdicts(ai)
    assert (
        ts["reference"]
        == py["reference"]
        == ai["reference"]
        == {
            "effects": ["message to sam: 2 x milk ordered", "order 2 x milk"],
            "model_calls": 2,
        }
    )
    assert failing(ts) == {"after-effect:1", "after-effect:4"}  # the model calls
    assert len(ts["cells"]) == 4  # and the two tools, which pass
