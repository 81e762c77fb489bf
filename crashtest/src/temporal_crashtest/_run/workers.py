"""The worker processes of a crash test's runs: one started for a target (to crash at a point,
warm, of the version deployed), told to poll, and stopped — each `python -m
temporal_crashtest.worker`, forked from a fork server where one runs; or, for a worker of any
SDK, its command, behind a proxy on the wire of its own that kills it (`_wire`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

from temporalio.client import Client

from temporal_crashtest._connect import security_for
from temporal_crashtest._errors import CellFailed
from temporal_crashtest._plan.target import CRASHTEST_WORKER, Target, Version
from temporal_crashtest._points.sites import CrashSite
from temporal_crashtest._run.processes import Child, Processes
from temporal_crashtest._run.recovery.polling import tree_histories
from temporal_crashtest._wire.kill import KillAtSite
from temporal_crashtest._wire.peers import Peers, can_tell, new_token
from temporal_crashtest._wire.scopes import RunScopes
from temporal_crashtest._wire.status import WireStatus
from temporal_crashtest._worker.process import GO, PARENT_PID_ENV
from temporal_crashtest._worker.status import Status, WorkerStatus

if TYPE_CHECKING:  # grpcio, the `wire` extra, is imported only to start a worker command
    from temporal_crashtest._wire.forward import WireProxy

# What reaches the server only, not the proxy (which talks to the worker in plain text and adds
# the key itself): not passed on to a worker command, whose SDK would read them.
TO_THE_SERVER_ONLY = (
    "TEMPORAL_TLS",
    "TEMPORAL_API_KEY",
    "TEMPORAL_GRPC_META_",
    "TEMPORAL_PROFILE",
    "TEMPORAL_CONFIG_FILE",
)
# What a worker command reads (every SDK's environment configuration reads TEMPORAL_ADDRESS and
# TEMPORAL_NAMESPACE; the task queue is crashtest's own name, as no SDK reads one).
ADDRESS_ENV, NAMESPACE_ENV, TASK_QUEUE_ENV = (
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "TEMPORAL_TASK_QUEUE",
)


@dataclass
class Worker:
    """A worker process of a cell, and what it has told of its state."""

    name: str
    child: Child
    status: Status
    proxy: WireProxy | None = None  # a worker command's, on the wire to the server

    def go(self) -> None:
        """Let a warm worker poll."""
        if isinstance(self.status, WireStatus):
            self.status.go()
        else:
            self.child.send_signal(GO)

    async def cut_off(self) -> None:
        """A dead worker command's calls still open, ended (its polls: the server could hand
        them the run's next task); nothing for a worker process killed in process."""
        if self.proxy is not None:
            await self.proxy.cut_off()


@dataclass(frozen=True, kw_only=True)
class Workers:
    """How this crash test starts its workers: of its target, on its server and namespace, with
    the observers' settings (`env`) in every worker's environment."""

    target: Target
    procs: Processes
    address: str
    namespace: str
    env: Mapping[str, str]
    client: Client  # the crash test's: a kill on the wire reads the run's tree through it

    async def start(
        self,
        name: str,
        task_queue: str,
        crash_at: CrashSite | None = None,
        workflow_id: str | None = None,
        *,
        warm: bool = False,
        task_timeout: timedelta | None = None,
        deployed: bool = False,
    ) -> Worker:
        """A worker of the target, crashing at `crash_at` if given (`warm`: built, polling once
        it gets GO; `deployed`: of the version deployed, in a deploy test)."""
        version = self.target.version(deployed)
        if version.on_the_wire:
            return await self._on_the_wire(name, version, task_queue, crash_at, workflow_id, warm)
        args = self.args(version.factory, task_queue)
        if crash_at is not None:
            args += ["--crash-at", crash_at.to_text()]
        if workflow_id is not None:
            args += ["--workflow-id", workflow_id]
        if task_timeout is not None:
            args += ["--task-timeout-s", f"{task_timeout.total_seconds():g}"]
        if warm:
            args += ["--warm"]
        status = WorkerStatus.listen(self.procs.log_dir / f"{name}.status")
        args += ["--status", str(status.path)]
        env = {**self.target.env, **self.env, PARENT_PID_ENV: str(os.getpid())}
        try:
            child = await self.procs.start_worker(name, args, version.tree, **env)
        except BaseException:
            status.close()
            raise
        return Worker(name, child, status)

    async def _on_the_wire(
        self,
        name: str,
        version: Version,
        task_queue: str,
        crash_at: CrashSite | None,
        workflow_id: str | None,
        warm: bool,
    ) -> Worker:
        """A worker command behind a proxy of its own, which kills it at `crash_at` in the run
        `workflow_id` and reads its state off the wire. The workflow task timeout is the run's:
        a worker command's is not set from here."""
        from temporal_crashtest._wire.forward import Upstream, WireProxy

        if crash_at is not None and workflow_id is not None:
            scopes = RunScopes(partial(self._tree_of, workflow_id))
            status: WireStatus = KillAtSite(crash_at, workflow_id, scopes, warm)
        else:
            status = WireStatus(warm)
        peers = Peers(new_token()) if can_tell() else None  # only its worker may use the proxy
        upstream = Upstream.of(self.address, security_for(self.address))
        proxy = WireProxy(upstream, [status], peers=peers)
        await proxy.start()
        env = {**self.target.env, **self.env, PARENT_PID_ENV: str(os.getpid())}
        env |= {ADDRESS_ENV: proxy.address, NAMESPACE_ENV: self.namespace}
        env |= {TASK_QUEUE_ENV: task_queue}
        token = peers.token if peers is not None else None
        try:
            child = await self._command(name, version, env, token)
        except BaseException:
            await proxy.stop()
            raise
        if peers is not None:
            peers.admit(child.pid)
        if isinstance(status, KillAtSite):
            status.arm(child.pid, token, self.procs.escaped)
        return Worker(name, child, status, proxy)

    async def _command(
        self, name: str, version: Version, env: dict[str, str], token: str | None
    ) -> Child:
        """A worker command started, in a process group of its own; crashtest's own Python
        worker in this interpreter forked instead, built, where its tree's fork server runs:
        given the proxy's address as an argument, its environment still names the server, so
        the TLS settings (which apply to the configured address only, `_connect.security_for`)
        leave it talking plain text to the proxy."""
        args = version.crashtest_worker
        if args is not None and self.procs.forking(version.tree):
            where = {k: env.pop(k) for k in (ADDRESS_ENV, NAMESPACE_ENV, TASK_QUEUE_ENV)}
            args = ["-m", CRASHTEST_WORKER, *args, "--address", where[ADDRESS_ENV]]
            args += ["--namespace", where[NAMESPACE_ENV], "--task-queue", where[TASK_QUEUE_ENV]]
            return await self.procs.start_worker(name, args, version.tree, **env)
        return await self.procs.start_command(
            name, version.command, version.tree, env, drop=TO_THE_SERVER_ONLY, token=token
        )

    async def _tree_of(self, workflow_id: str) -> dict[tuple[str, str], str]:
        """Every run of the tree of `workflow_id` the server has now, by (workflow id, run id):
        its scope, read from the tree's shape (`_polling.tree_scope`)."""
        described = await self.client.get_workflow_handle(workflow_id).describe()
        first = described.raw_description.workflow_execution_info.first_run_id
        runs = await tree_histories(self.client, workflow_id, first, stamped=False)
        return {(r.workflow_id, r.run_id): r.scope for r in runs}

    def args(self, factory: str, task_queue: str) -> list[str]:
        """`python -m temporal_crashtest.worker`'s arguments for `factory` on `task_queue`."""
        args = ["-m", "temporal_crashtest.worker", "--worker", factory]
        args += ["--task-queue", task_queue]
        args += ["--address", self.address, "--namespace", self.namespace]
        if self.target.data_converter:
            args += ["--data-converter", self.target.data_converter]
        for plugin in self.target.plugins:
            args += ["--plugin", plugin]
        return args

    async def go(self, worker: Worker, deadline: float) -> None:
        """Tell a warm worker to poll, once it says it is built (a signal before its handler is
        set would end it)."""
        warm = asyncio.ensure_future(worker.status.warm.wait())
        exited = asyncio.ensure_future(worker.child.wait())
        try:
            await asyncio.wait(
                {warm, exited},
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            warm.cancel()
            exited.cancel()
        if worker.status.warm.is_set():
            with contextlib.suppress(ProcessLookupError):
                worker.go()
        elif worker.child.returncode is None:
            raise CellFailed(f"the next worker was not built in time: {self._said(worker)}")
        # it exited: waiting for the run says how

    def _said(self, worker: Worker) -> str:
        last = self.procs.last_line(worker.name)
        if last and last != "(no output)":
            return f"its last line: {last}"
        return (
            "it wrote nothing: still importing the workers' code? (a worker that starts afresh "
            "imports everything again; see why none can be forked above, or give each cell "
            "longer: --deadline-s)"
        )

    async def kill(self, worker: Worker) -> None:
        """SIGKILL the worker (crashtest's doing, not the worker's own: a run that waits) and
        wait for it to die; a worker command's calls still open on the wire, ended."""
        self.procs.kill(worker.child)
        await worker.child.wait()
        await worker.cut_off()

    async def stop(self, workers: list[Worker]) -> None:
        for w in workers:
            if w.proxy is not None:
                w.go()  # a warm worker command held at its first poll stops as any other
        await asyncio.gather(*(self.procs.stop(w.child) for w in workers))
        for w in workers:
            w.status.close()
            if w.proxy is not None:
                await w.proxy.stop()

    def last_line(self, worker: Worker) -> str:
        return self.procs.last_line(worker.name)
