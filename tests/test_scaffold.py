"""`python -m temporal_crashtest scaffold`: the hooks file for two framework agents of the
examples, written from their code, then the crash test it prints, run as it is (with the
framework's plugin, the input and the HTTP service the tools send their effects to): the unkeyed
agent's tool calls are caught, the keyed agent's are clean."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.db import ensure_database_url
from tests.effects_service import EffectsService, effects_service
from tests.helpers import child_env, crashtest_runs, prepare_database, run_python

AGENTS = {
    "unkeyed": ("examples.frameworks.strands_agent:UnkeyedOrderAgent", "strands_agent"),
    "keyed": ("examples.frameworks.google_adk_agent:KeyedOrderAgent", "google_adk_agent"),
}
TOOL_POINTS = "after-effect:2,after-effect:3"  # the two tools (1 and 4 are model calls)


@pytest.fixture
def service() -> Iterator[EffectsService]:
    with effects_service() as running:
        yield running


def test_the_scaffold_writes_hooks_a_crash_test_runs(
    temporal_address: str, service: EffectsService, tmp_path: Path
) -> None:
    env = child_env(
        prepare_database(ensure_database_url()),
        TEMPORAL_ADDRESS=temporal_address,
        EFFECTS_URL=f"http://{service.netloc}",
        PYTHONPATH=str(tmp_path),  # where the hooks files are written
    )
    ledger = "import asyncio; from examples.frameworks.effects import ensure_ledger as e; "
    assert run_python(["-c", ledger + "asyncio.run(e())"], env).returncode == 0  # the app's table
    runs: dict[str, tuple[list[str], dict[str, str]]] = {}
    for name, (workflow, module) in AGENTS.items():
        out = tmp_path / f"{name}_hooks.py"
        done = run_python(
            ["-m", "temporal_crashtest", "scaffold", workflow, "--out", str(out)], env
        )
        assert done.returncode == 0, done.stderr
        said = done.stdout
        assert f"wrote {out}: 1 workflow(s), 2 activity(ies)" in said, said
        assert "--plugin MODULE:NAME" in said  # it saw the framework's plugin, and says so
        command = re.search(r"^run: python -m temporal_crashtest run (.*)$", said, re.M)
        assert command is not None, said
        args = shlex.split(command.group(1))
        assert args[:4] == ["--worker", f"{name}_hooks:build_worker", "--workflow", workflow]
        at = args.index("--input")
        args[at + 1] = '"milk"'
        args += ["--plugin", f"examples.frameworks.{module}:plugin", "--points", TOOL_POINTS]
        args += ["--http-paid", f"{service.netloc}/v1/"]
        runs[name] = (args, {})
        again = run_python(
            ["-m", "temporal_crashtest", "scaffold", workflow, "--out", str(out)], env
        )
        assert again.returncode == 2 and "exists" in again.stderr  # never overwritten unasked

    results = crashtest_runs(runs, env, tmp_path)
    (unkeyed, unkeyed_report), (keyed, keyed_report) = results["unkeyed"], results["keyed"]
    assert unkeyed.returncode == 1, unkeyed.stderr[-2000:]
    assert keyed.returncode == 0, keyed.stderr[-2000:]
    assert {c["crash_at"] for c in unkeyed_report["cells"] if not c["matches"]} == set(
        TOOL_POINTS.split(",")
    ), json.dumps(unkeyed_report["cells"], indent=1)[:3000]
    assert all(c["matches"] for c in keyed_report["cells"])
