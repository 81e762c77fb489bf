"""The crash test's data model: what is crash-tested (`Target`), where one cell crashes
(`CellPoint`), and the run without a crash every cell is compared with (`Reference`: its observed
state and the tree of boundaries its histories list)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from temporalio.client import WorkflowHandle

Observe = Callable[[str], Any]
"""`observe(workflow_id) -> JSON-able`: your view of a run's final state (sync or async)."""
Drive = Callable[[WorkflowHandle[Any, Any]], Any]
"""`drive(handle)`: sends the signals and updates a run waits for (sync or async)."""
CRASHTEST_WORKER = "temporal_crashtest.worker"  # the module of crashtest's Python worker


@dataclass(kw_only=True, frozen=True)
class Target:
    """What is crash-tested: how to build its worker, which workflow, with what input.

    Args:
        worker: `MODULE:FACTORY`; `FACTORY(client, task_queue)` returns the Worker (or several,
            one per task queue its process serves), built on the client it is given.
        workflow: the workflow type name (the CLI also takes `MODULE:CLASS`).
        input: the workflow's one argument, as JSON.
        data_converter: `MODULE:NAME` of a temporalio DataConverter, for every client.
        plugins: `MODULE:NAME` of temporalio client plugins (an agent framework's).
        env: more environment for the worker processes.
        resume_after_s: wait this long after a kill (or before a reset) before the run resumes,
            e.g. past an idempotency key's TTL.
        deploy_to: `MODULE:FACTORY` of the next version's worker: every run starts on `worker`,
            and the worker that takes a run over after a kill runs this one (a deploy). The
            workflow type names must be the same.
        worker_tree: the source tree `worker` is imported from (the working directory of its
            processes and first on their import path): a checkout of another version, e.g. a
            `git worktree` of the base branch; None: this process's working directory.
        deploy_tree: the same for `deploy_to`.
        worker_cmd: the worker as a command of any language (`node lib/worker.js`), in place of
            `worker`: it reads the server's address, namespace and task queue from the
            environment, and is killed on the wire, through a proxy (`_wire`).
        deploy_cmd: the next version's worker command, in place of `deploy_to` (run in
            `deploy_tree` if given).
    """

    worker: str  # MODULE:FACTORY, FACTORY(client, task_queue) -> Worker
    workflow: str  # the workflow type name
    input: Any  # the workflow's one argument, as JSON
    data_converter: str | None = None  # MODULE:NAME, for the worker processes' clients
    plugins: tuple[str, ...] = ()  # MODULE:NAME of client plugins, for every client
    env: dict[str, str] = field(default_factory=dict)  # more environment for the workers
    resume_after_s: float = 0.0  # wait this long after a kill (or before a reset) to resume
    deploy_to: str | None = None  # MODULE:FACTORY of the version that takes over after a kill
    worker_tree: str | None = None  # the source tree `worker` is imported from (None: here)
    deploy_tree: str | None = None  # the source tree `deploy_to` is imported from
    worker_cmd: tuple[str, ...] = ()  # the worker as a command, in place of `worker`
    deploy_cmd: tuple[str, ...] = ()  # the next version's worker command, in place of deploy_to

    @property
    def old(self) -> Version:
        """The version every run starts on."""
        return Version(self.worker, self.worker_tree, self.worker_cmd)

    @property
    def deploy(self) -> Deploy | None:
        """A deploy test's two versions (None: not a deploy test)."""
        if self.deploy_to is None and not self.deploy_cmd:
            return None
        return Deploy(self.old, Version(self.deploy_to or "", self.deploy_tree, self.deploy_cmd))

    def version(self, deployed: bool) -> Version:
        """The old version, or (`deployed`, in a deploy test) the new one."""
        deploy = self.deploy
        return deploy.new if deployed and deploy is not None else self.old

    def alone(self, version: Version) -> Target:
        """`version` tested alone (e.g. the new version's run without a crash)."""
        return replace(
            self,
            worker=version.factory,
            worker_tree=version.tree,
            worker_cmd=version.command,
            deploy_to=None,
            deploy_tree=None,
            deploy_cmd=(),
        )


@dataclass(frozen=True)
class Version:
    """One version of the workers: its factory and the source tree it is imported from (None:
    this process's working directory); or the command that runs it, in any language
    (`command`: its workers are killed on the wire, `_wire`)."""

    factory: str  # MODULE:FACTORY
    tree: str | None = None
    command: tuple[str, ...] = ()  # a worker of any SDK, run as this command (in `tree`)

    @property
    def on_the_wire(self) -> bool:
        """Its workers are commands, killed on the wire: their activities carry no stamp, their
        runs are numbered from the history alone (`RunHistory.stamped`)."""
        return bool(self.command)

    @property
    def crashtest_worker(self) -> list[str] | None:
        """A command that runs crashtest's own Python worker in this interpreter (`python -m
        temporal_crashtest.worker ARGS`, `python` this process's): ARGS. Its workers are forked
        from a fork server, built, as a factory's are, and killed on the wire all the same.
        None: any other command."""
        found = shutil.which(self.command[0]) if self.command else None
        if found is None or os.path.abspath(found) != os.path.abspath(sys.executable):
            return None
        if list(self.command[1:3]) != ["-m", CRASHTEST_WORKER]:
            return None
        return list(self.command[3:])

    @property
    def forked_factory(self) -> str | None:
        """The factory a fork server imports for its workers (None: they are started as
        commands)."""
        if not self.command:
            return self.factory
        args = self.crashtest_worker or []
        return next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--worker"), None)

    def __str__(self) -> str:
        what = shlex.join(self.command) if self.command else self.factory
        return what if self.tree is None else f"{what} from {self.tree}"


@dataclass(frozen=True)
class Deploy:
    """A deploy test: every run starts on `old`; the worker that takes a run over after a kill
    (or runs a reset run) is `new`'s."""

    old: Version
    new: Version
