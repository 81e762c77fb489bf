"""The proxy on the wire between a worker and the server (`_wire`), with a real Python worker and
the dev server: every call passes through untouched — results, errors with their details, what is
left of a deadline — and the activity tasks it hands out and their ends are read off the wire; a
completion it drops never reaches the server, which runs the activity again (the kill on the wire
to come: the worker dies with its completion unsent); and a worker run as a command, in Python
or TypeScript, killed there, its process group and all."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import APPS
from temporal_crashtest._points.points import Moment
from temporal_crashtest._points.sites import ROOT_SCOPE, CrashSite
from temporal_crashtest._process_groups import TOKEN_ENV, kill_group
from temporal_crashtest._run.recovery.fastforward import fast_forward
from temporal_crashtest._wire.forward import REFUSED, Pass, WireProxy
from temporal_crashtest._wire.kill import KillAtSite
from temporal_crashtest._wire.peers import Peers, can_tell, new_token
from temporal_crashtest._wire.scopes import RunScopes
from temporal_crashtest._wire.tasks import WireTasks
from temporalio import activity, workflow
from temporalio.api.workflowservice.v1 import (
    PollActivityTaskQueueRequest,
)
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RetryPolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

pytestmark = pytest.mark.servers

RAN: list[int] = []  # the attempts of `note` that ran, in this process


@activity.defn
async def note(text: str) -> str:
    RAN.append(activity.info().attempt)
    return text.upper()


@workflow.defn
class NoteWorkflow:
    @workflow.run
    async def run(self, text: str) -> str:
        return await workflow.execute_activity(
            note,
            text,
            start_to_close_timeout=timedelta(seconds=2),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100)),
        )


class DropFirstAttempt(WireTasks):
    """Drops every end a worker sends for an attempt 1: the server never hears it."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    async def before(self, method: str, request: bytes) -> Pass:
        end = self.end_of(method, request)
        if end is not None and end.task.attempt == 1:
            self.dropped += 1
            return Pass.DROP
        return Pass.GO


async def _through(
    address: str, watcher: WireTasks, test: Callable[[WireProxy], Awaitable[None]]
) -> None:
    proxy = WireProxy(address, [watcher])
    await proxy.start()
    try:
        await asyncio.wait_for(test(proxy), 60)
    finally:
        await proxy.stop()


async def _run(client: Client) -> str:
    queue = f"wire-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[NoteWorkflow], activities=[note]):
        return await client.execute_workflow(
            NoteWorkflow.run, "milk", id=f"wire-{uuid.uuid4().hex[:8]}", task_queue=queue
        )


def test_a_run_through_the_proxy_and_its_tasks_on_the_wire(temporal_address: str) -> None:
    tasks = WireTasks()

    async def test(proxy: WireProxy) -> None:
        RAN.clear()
        assert await _run(await Client.connect(proxy.address)) == "MILK"
        assert proxy.calls > 5

    asyncio.run(_through(temporal_address, tasks, test))
    (task,) = tasks.handed.values()
    assert (task.activity_type, task.activity_id, task.attempt) == ("note", "1", 1)
    (end,) = tasks.ended
    assert end.task == task and end.how == "completed" and RAN == [1]


def test_errors_and_their_details_come_back_as_sent(temporal_address: str) -> None:
    async def test(proxy: WireProxy) -> None:
        client = await Client.connect(proxy.address)
        workflow_id, queue = f"wire-{uuid.uuid4().hex[:8]}", "wire-nobody"
        await client.start_workflow(NoteWorkflow.run, "x", id=workflow_id, task_queue=queue)
        # The SDK raises this only from the status's details (its failure's type).
        with pytest.raises(WorkflowAlreadyStartedError):
            await client.start_workflow(NoteWorkflow.run, "x", id=workflow_id, task_queue=queue)
        with pytest.raises(RPCError) as missing:
            await client.get_workflow_handle("wire-no-such-run").describe()
        assert missing.value.status == RPCStatusCode.NOT_FOUND
        await client.get_workflow_handle(workflow_id).terminate()

    asyncio.run(_through(temporal_address, WireTasks(), test))


def test_a_long_poll_ends_at_its_callers_deadline(temporal_address: str) -> None:
    async def test(proxy: WireProxy) -> None:
        client = await Client.connect(proxy.address)
        poll = PollActivityTaskQueueRequest(namespace="default")
        poll.task_queue.name = f"wire-empty-{uuid.uuid4().hex[:8]}"
        began = time.monotonic()
        try:  # the server refuses a long poll with less than 2 s to go
            answer = await client.workflow_service.poll_activity_task_queue(
                poll, retry=False, timeout=timedelta(seconds=3)
            )
            assert not answer.task_token
        except RPCError as err:
            assert err.status == RPCStatusCode.DEADLINE_EXCEEDED, err
        assert time.monotonic() - began < 8  # not the server's 60 s long poll

    asyncio.run(_through(temporal_address, WireTasks(), test))


def test_a_dropped_completion_never_reaches_the_server(temporal_address: str) -> None:
    """The activity ran and its worker sent the completion; dropped on the wire, the server
    times attempt 1 out and runs attempt 2: the effect twice, as after a kill at that moment."""
    dropping = DropFirstAttempt()

    async def test(proxy: WireProxy) -> None:
        RAN.clear()
        assert await _run(await Client.connect(proxy.address)) == "MILK"

    asyncio.run(_through(temporal_address, dropping, test))
    assert dropping.dropped >= 1 and RAN == [1, 2]
    assert [(e.task.attempt, e.how) for e in dropping.ended] == [(2, "completed")]


# A worker of each language, as a command: Python, and TypeScript (examples/typescript, built by
# `make test`: `npm ci && npm run build` there). Node itself may be missing: then only that skips.
TYPESCRIPT = Path(__file__).parents[2] / "examples" / "typescript"
COMMANDS = {
    "python": [sys.executable, str(APPS / "command_worker.py")],
    "typescript": ["node", str(TYPESCRIPT / "lib" / "worker.js")],
}


def command_for(language: str) -> list[str]:
    if language == "typescript":
        if shutil.which("node") is None:
            pytest.skip("node is missing: the TypeScript worker cannot run here")
        assert (TYPESCRIPT / "lib" / "worker.js").exists(), "build it: make typescript"
    return COMMANDS[language]


ONCE, TWICE = ["milk", "eggs"], ["milk", "milk", "eggs"]
TIMELY_S = 1.0  # a fast-forward this soon after the kill comes before the attempt's 2 s timeout


async def _taken_over(
    command: list[str], env: dict[str, str], cwd: Path, run: WorkflowHandle[Any, Any]
) -> None:
    """A fresh worker command finishes the run (its two notes), then is stopped."""
    second = await asyncio.create_subprocess_exec(
        *command, env=env, cwd=cwd, start_new_session=True
    )
    try:
        assert await run.result() == 2
    finally:
        kill_group(second.pid)
        await second.wait()


@pytest.mark.parametrize("language", COMMANDS)
@pytest.mark.parametrize(
    ("moment", "keyed", "fast", "notes"),
    [
        ("after-effect", False, False, TWICE),
        ("after-effect", False, True, TWICE),
        ("after-effect", True, True, ONCE),
        ("after-checkpoint", False, True, ONCE),
    ],
)
def test_a_worker_command_killed_on_the_wire(
    app_env: dict[str, str],
    tmp_path: Path,
    language: str,
    moment: str,
    keyed: bool,
    fast: bool,
    notes: list[str],
) -> None:
    """A worker started as a command (apps/command_worker.py, or the same worker in TypeScript,
    through the proxy's address in TEMPORAL_ADDRESS) is SIGKILLed, its whole process group, as it
    sends the first activity's completion (after-effect), or once the server has recorded it
    (after-checkpoint); a fresh command takes over after the attempt's 2 s timeout, or at once
    (`fast`: the attempt the server says the dead worker started, found by the identity its
    completion carried, is ended through the API, so is a workflow task it held, by the token
    seen on the wire, and the run is taken off its sticky queue). Unkeyed, the note is written
    twice after the effect and once after the checkpoint, as the in-process kills show; keyed,
    once — in either language, either way."""
    command = command_for(language)
    env = {**app_env, "TEMPORAL_TASK_QUEUE": f"wire-{uuid.uuid4().hex[:8]}"}
    env |= {"NOTES_KEYED": "1"} if keyed else {}
    workflow_id = f"wire-{uuid.uuid4().hex[:8]}"
    site = CrashSite(
        moment=Moment(moment),
        scope=ROOT_SCOPE,
        position=1,
        activity_id="1",
        activity_type={"python": "write_note", "typescript": "writeNote"}[language],
    )
    runs: dict[tuple[str, str], str] = {}

    async def tree() -> dict[tuple[str, str], str]:
        return runs  # one run, the root's first

    killing = KillAtSite(site, workflow_id, RunScopes(tree))
    done: list[str] = []
    timely: list[bool] = []

    async def test(proxy: WireProxy) -> None:
        through = {**env, "TEMPORAL_ADDRESS": proxy.address}
        first = await asyncio.create_subprocess_exec(
            *command, env=through, cwd=tmp_path, start_new_session=True
        )
        killing.arm(first.pid)
        client = await Client.connect(env["TEMPORAL_ADDRESS"])
        run = await client.start_workflow(
            "TwoNotes", ["milk", "eggs"], id=workflow_id, task_queue=env["TEMPORAL_TASK_QUEUE"]
        )
        runs[(workflow_id, run.result_run_id or "")] = ROOT_SCOPE
        assert await first.wait() == -signal.SIGKILL
        if fast:
            since_the_kill = time.monotonic()
            await proxy.cut_off()
            assert killing.crash is not None
            ended = await fast_forward(client, run, [], "wire", killing.facts.get("identity"))
            # On a loaded machine the attempt's own 2 s timeout may have ended it first.
            timely.append(time.monotonic() - since_the_kill < TIMELY_S)
            done.extend(ended.done)
        await _taken_over(command, through, tmp_path, run)

    asyncio.run(_through(app_env["TEMPORAL_ADDRESS"], killing, test))
    assert killing.crash is not None and killing.crash["killed"]["activity_id"] == "1"
    written = (tmp_path / f"{workflow_id}.txt").read_text().splitlines()  # notes_app's file
    assert [line.split(" ", 1)[1] for line in written] == notes
    if fast and moment == "after-effect" and all(timely):  # found by its pending activity
        name = {"python": "write_note", "typescript": "writeNote"}[language]
        assert any("1 more it held" in line and name in line for line in done), done


# (os._exit: the SDK's Rust threads can crash an interpreter's teardown, see infra.cli.exit_now)
COUNT = "import asyncio, os, sys; from temporalio.client import Client\n" \
    "async def main():\n" \
    "    client = await Client.connect(sys.argv[1])\n" \
    "    print(await client.count_workflows(), flush=True)\n" \
    "asyncio.run(main())\n" \
    "os._exit(0)\n"  # fmt: skip


def test_the_proxy_serves_only_the_worker_it_was_started_for(
    temporal_address: str, tmp_path: Path
) -> None:
    """The probe: while a `--worker-cmd` crash test ran, any local process could connect to its
    proxy and list workflows, with the operator's API key or client certificate put on every
    call. Now a process that is not the worker's — neither the process it was started for, nor
    one that process started, nor one carrying its token — is refused in one line; the
    worker's own calls go through."""
    peers = Peers(new_token())

    async def check() -> None:
        proxy = WireProxy(temporal_address, peers=peers)
        address = await proxy.start()
        try:
            with pytest.raises(RuntimeError) as refused:  # this process: a stranger
                await Client.connect(address)
            assert "PermissionDenied" in str(refused.value), refused.value
            assert REFUSED in str(refused.value), refused.value
            carrier = await asyncio.create_subprocess_exec(
                sys.executable, "-c", COUNT, address, stdout=asyncio.subprocess.PIPE,
                env={**os.environ, TOKEN_ENV: peers.token},
            )  # fmt: skip
            out, _ = await asyncio.wait_for(carrier.communicate(), 60)
            assert carrier.returncode == 0 and "WorkflowExecutionCount" in out.decode(), out
            admitted = await asyncio.create_subprocess_exec(
                sys.executable, "-c", f"import time; time.sleep(0.3); exec({COUNT!r})", address,
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            peers.admit(admitted.pid)
            out, _ = await asyncio.wait_for(admitted.communicate(), 60)
            assert admitted.returncode == 0 and "WorkflowExecutionCount" in out.decode(), out
        finally:
            await proxy.stop()

    if not can_tell():
        pytest.skip("no /proc: which process holds a connection cannot be told here")
    asyncio.run(check())
