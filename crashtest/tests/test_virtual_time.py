"""Every run the tool starts asks the server to skip the time it waits on timers (Temporal's
per-workflow time skipping), where the server allows it; a server that does not is said in one
line, and its runs take their real time. Against the suite's dev server (which allows it, as
every dev server the tool or this repository starts does) and a dev server started without it.
The crash tests of workflows that wait days are in tests/test_crashtest_shapes.py."""

from __future__ import annotations

import asyncio
import subprocess
from datetime import timedelta
from pathlib import Path

from temporal_crashtest._connect import connect
from temporal_crashtest._run.devserver import (
    DYNAMIC_CONFIG,
    dev_server_command,
    free_port,
    temporal_cli,
    wait_until_listening,
)
from temporal_crashtest._run.virtual_time import HOW_TO, NOT_SKIPPED, starting_client
from temporalio.client import Client

SKIPPING = "frontend.WorkflowTimeSkippingEnabled"


async def _starting(address: str) -> tuple[Client, Client | None, list[str]]:
    said: list[str] = []
    client = await connect(address, namespace="default")
    return client, await starting_client(client, timedelta(days=365), said.append), said


def test_the_tools_dev_servers_allow_skipping() -> None:
    assert DYNAMIC_CONFIG[SKIPPING] == "true"
    binary = temporal_cli()
    assert binary is not None
    assert f"{SKIPPING}=true" in dev_server_command(binary)
    assert HOW_TO == f"--dynamic-config-value {SKIPPING}=true"


def test_a_server_that_skips_gets_runs_that_skip(temporal_address: str) -> None:
    client, starter, said = asyncio.run(_starting(temporal_address))
    assert starter is not None and starter is not client and said == []


def test_a_server_that_does_not_skip_is_said_in_one_line(tmp_path: Path) -> None:
    binary = temporal_cli()
    assert binary is not None
    port = free_port()
    command = dev_server_command(binary, port=port, ui_port=None)
    at = command.index(f"{SKIPPING}=true")
    del command[at - 1 : at + 1]  # its --dynamic-config-value and the value
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_listening(server, "127.0.0.1", port, log)
        _, starter, said = asyncio.run(_starting(f"127.0.0.1:{port}"))
    finally:
        server.kill()
        server.wait()
    assert starter is None
    assert said == [NOT_SKIPPED] and HOW_TO in NOT_SKIPPED and "\n" not in NOT_SKIPPED
