"""What is crash-tested (`Target`): the workflow, its input, and its versions (`Version`: the one
every run starts on, and in a deploy test the one that takes a run over, `Deploy`), with the
options that give each (`OPTIONS`); and the user's two callables' shapes (`Observe`, `Drive`)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle

from temporal_crashtest._errors import InputError
from temporal_crashtest._files import read_json
from temporal_crashtest._loading import workflow_type
from temporal_crashtest._option import Option, Part, Reads, declared
from temporal_crashtest._text import shown

Observe = Callable[[str], Any]
"""`observe(workflow_id) -> JSON-able`: your view of a run's final state (sync or async)."""
Drive = Callable[[WorkflowHandle[Any, Any]], Any]
"""`drive(handle)`: sends the signals and updates a run waits for (sync or async)."""
CRASHTEST_WORKER = "temporal_crashtest.worker"  # the module of crashtest's Python worker


def _command(flag: str) -> Callable[[str], tuple[str, ...]]:
    def read(text: str) -> tuple[str, ...]:
        try:
            words = tuple(shlex.split(text))
        except ValueError as err:
            raise InputError(f"{flag} {shown(text)}: {err}") from None
        if not words:
            raise InputError(f"{flag} is empty")
        return words

    return read


def _a_command(value: Any) -> str:
    return value if isinstance(value, str) else shlex.join(value)


def _tree(path: str) -> str:
    """A source tree's absolute path (its processes are told where their files are)."""
    return str(Path(path).absolute())


def _versions(
    part: Part, factory: tuple[str, str], tree: tuple[str, str], command: tuple[str, str]
) -> tuple[Option, ...]:
    """A version's three options (name, help each): its factory, its source tree, its command."""
    return (
        Option(factory[0], factory[1], part, field="factory", code=True, metavar="MODULE:FACTORY"),
        Option(
            tree[0], tree[1], part, field="tree", metavar="DIR", read=_tree
        ),
        Option(
            command[0], command[1], part, field="command", metavar="COMMAND",
            read=_command(f"--{command[0].replace('_', '-')}"), write=_a_command, default=(),
        ),
    )  # fmt: skip


OPTIONS: tuple[Option, ...] = (
    *_versions(
        Part.OLD,
        ("worker", "MODULE:FACTORY, (client, task_queue) -> Worker"),
        (
            "worker_tree",
            "import --worker from this source tree (a checkout of another version, e.g. `git "
            "worktree add ../base main`): its processes run there, so modules of the same name "
            "load from it",
        ),
        (
            "worker_cmd",
            "in place of --worker: a worker of any SDK, as a command (`node lib/worker.js`) that "
            "reads TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and TEMPORAL_TASK_QUEUE; killed on the "
            "wire, through a proxy",
        ),
    ),
    Option(
        "workflow", "MODULE:CLASS (or the workflow type name)", Part.TARGET, code=True,
        required=True, read=workflow_type, metavar="MODULE:CLASS",
    ),
    Option(
        "input", "the workflow's argument, as JSON or @FILE holding JSON", Part.TARGET,
        reads=Reads.JSON, required=True, read=lambda text: read_json(text, "--input"),
    ),
    *_versions(
        Part.NEW,
        (
            "deploy_to",
            "a deploy test: every run starts on --worker, and the worker that takes it over "
            "after a kill runs this factory's code (the next version: same workflow type); a "
            "crashed run must end as either version's run without a crash",
        ),
        ("deploy_tree", "import --deploy-to (or run --deploy-cmd) from this source tree"),
        (
            "deploy_cmd",
            "in place of --deploy-to, with --worker-cmd: the next version's worker command",
        ),
    ),
    Option(
        "data_converter", "MODULE:NAME of a temporalio DataConverter, for every client",
        Part.TARGET, code=True, metavar="MODULE:NAME",
    ),
    Option(
        "plugins",
        "MODULE:NAME of temporalio client Plugins (an agent framework's), for every client; "
        "comma-separated, or the flag again",
        Part.TARGET, reads=Reads.LIST, code=True, metavar="MODULE:NAME", also=("--plugin",),
        default=(),
    ),
    Option(
        "env", "more environment for the worker processes (the command line's: its own)",
        Part.TARGET, reads=Reads.NO_FLAG, default_factory=dict,
    ),
)  # fmt: skip


@dataclass(kw_only=True, frozen=True)
class Target:
    """What is crash-tested: the workflow and its input, the version every run starts on
    (`old`), in a deploy test the version that takes a run over after a kill (`new`), and what
    every client and worker of them is built with. Each field's option is declared in `OPTIONS`
    above (crashtest/docs/options.md lists them); a version's are its three flags."""

    workflow: str  # the workflow type name
    input: Any  # the workflow's one argument, as JSON
    old: Version  # the version every run starts on
    new: Version | None = None  # a deploy test's next version: it takes a run over after a kill
    data_converter: str | None = declared(OPTIONS, "data_converter")
    plugins: tuple[str, ...] = declared(OPTIONS, "plugins")
    env: dict[str, str] = declared(OPTIONS, "env")

    @property
    def deploy(self) -> Deploy | None:
        """A deploy test's two versions (None: not a deploy test)."""
        return None if self.new is None else Deploy(self.old, self.new)

    def version(self, deployed: bool) -> Version:
        """The old version, or (`deployed`, in a deploy test) the new one."""
        return self.new if deployed and self.new is not None else self.old

    def alone(self, version: Version) -> Target:
        """`version` tested alone (e.g. the new version's run without a crash)."""
        return replace(self, old=version, new=None)


@dataclass(frozen=True)
class Version:
    """One version of the workers: its factory and the source tree it is imported from (None:
    this process's working directory); or the command that runs it, in any language
    (`command`: its workers are killed on the wire, `_wire`)."""

    factory: str = ""  # MODULE:FACTORY
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
