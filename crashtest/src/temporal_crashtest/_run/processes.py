"""Every process a crash test starts, tracked by pid, so none outlives the tool: started afresh,
or forked by a fork server (`temporal_crashtest._run.forkserver`) that imported the workers' code
once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from temporal_crashtest._errors import InputError
from temporal_crashtest._files import open_log
from temporal_crashtest._process_groups import TOKEN_ENV, dying_with_me, kill_group
from temporal_crashtest._text import shown

CANNOT_IMPORT = "cannot import the worker: "  # how a fork server says its imports failed
# A fork server's imports (the workers' code, the SDK, a framework) take a few seconds; one that
# has not said it is ready by then never will (a module that waits at import).
IMPORT_TIMEOUT_S = 60.0
TAIL_BYTES = 64 * 1024  # how much of a process's log is read for its last line


class Child(Protocol):
    """What the crash test needs of a worker process, started afresh or forked."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


@dataclass(frozen=True)
class ForkedServer:
    """A fork server this process forked: its pid, the fd to write requests to, the fd to read
    answers from."""

    pid: int
    requests_fd: int
    answers_fd: int


@dataclass(frozen=True)
class NotForked:
    """Why no fork server was forked from this process ("" when none was tried)."""

    why: str


class Forked:
    """A worker process forked by the fork server; it learns how the process ended from it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._ended = asyncio.Event()

    def ended(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    async def wait(self) -> int:
        await self._ended.wait()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The crash test's side of a fork server (`_run.forkserver`): a process of its own, or one
    forked from this process (`forkserver.fork_here`)."""

    def __init__(
        self, proc: Child, requests: asyncio.StreamWriter, answers: asyncio.StreamReader
    ) -> None:
        self.proc = proc
        self.requests = requests
        self.answers = answers
        self._pids: asyncio.Queue[int] = asyncio.Queue()
        self._children: dict[int, Forked] = {}
        self._lock = asyncio.Lock()
        self._reader: asyncio.Task[None] | None = None

    @classmethod
    async def adopt(cls, pid: int, requests_fd: int, answers_fd: int) -> ForkServer:
        """The fork server this process forked (it is this process's child: it is reaped when
        its answers end)."""
        loop = asyncio.get_running_loop()
        answers = asyncio.StreamReader()
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(answers), os.fdopen(answers_fd, "rb")
        )
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(requests_fd, "wb")
        )
        requests = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(Forked(pid), requests, answers)

    async def ready(self, timeout_s: float = IMPORT_TIMEOUT_S) -> str | None:
        """Wait for the imports, at most `timeout_s`; None once it forks, else why it cannot."""
        try:
            line = await asyncio.wait_for(self.answers.readline(), timeout_s)
        except TimeoutError:
            return (
                f"{CANNOT_IMPORT}its imports did not finish within {timeout_s:g} s (a module "
                "that sleeps, waits on a network or a lock, or reads stdin when imported?)"
            )
        try:
            answer = json.loads(line) if line else {"unsafe": "it exited on start"}
        except ValueError:
            answer = {"unsafe": f"it said {line[:200]!r}"}
        self._reader = asyncio.ensure_future(self._read())  # and reaps it when it ends
        return None if answer.get("ready") else str(answer.get("unsafe", answer))

    async def _read(self) -> None:
        while line := await self.answers.readline():
            answer: dict[str, Any] = json.loads(line)
            if "pid" in answer:
                self._pids.put_nowait(int(answer["pid"]))
            elif "exited" in answer:
                child = self._children.pop(int(answer["exited"]), None)
                if child is not None:
                    child.ended(int(answer["code"]))
        for child in self._children.values():  # the fork server is gone, and its workers with it
            child.ended(-signal.SIGKILL)
        if isinstance(self.proc, Forked):  # this process's own child: reap it
            _, status = await asyncio.to_thread(os.waitpid, self.proc.pid, 0)
            self.proc.ended(os.waitstatus_to_exitcode(status))

    async def fork(self, log: Path, args: list[str], env: Mapping[str, str]) -> Forked:
        async with self._lock:  # answers come in the order of the requests
            request = {"log": str(log), "args": args, "env": dict(env)}
            self.requests.write((json.dumps(request) + "\n").encode())
            await self.requests.drain()
            pid = await self._pids.get()
            child = self._children[pid] = Forked(pid)
        return child


class Processes:
    """Starts `python ARGS` children with output to `<log_dir>/<name>.log`, and kills them all
    when asked (`kill_all`), whatever state they are in; each dies with this process, even if
    this process is SIGKILLed.

    Args:
        log_dir: where each child's `<name>.log` goes (made if missing).
        base_env: every child's environment (`start`'s keyword arguments are added to it).
        cwd: the children's working directory; None: this process's.

    A child may be started in another source tree (`tree`: a checkout of another version of the
    user's code): it runs in that folder, which `python -m` puts first on its import path, so
    modules of the same name load from there; each tree has a fork server of its own.
    """

    def __init__(self, log_dir: Path, base_env: Mapping[str, str], cwd: Path | None = None) -> None:
        self.log_dir = log_dir.absolute()  # children in another tree are told absolute paths
        self.cwd = cwd  # None: the caller's working directory
        self.base_env = dict(base_env)
        self.running: dict[int, Child] = {}
        self.forks: dict[str | None, ForkServer] = {}  # by source tree (None: `cwd`)
        self.tokens: dict[int, str] = {}  # a worker command's pid -> the token of what it started
        self.escaped: list[int] = []  # processes killed by token that had left their group
        self.log_dir.mkdir(parents=True, exist_ok=True)

    async def start(
        self, name: str, args: list[str], tree: str | None = None, **env: str
    ) -> asyncio.subprocess.Process:
        """Start `python <args>` (in source tree `tree`, if given); stdout and stderr go to
        `name`.log. The child dies with this process, even if this process is SIGKILLed (see
        `die_with_parent`)."""
        return await self._spawn(name, args, env, tree, pipes=False)

    async def _spawn(
        self, name: str, args: list[str], env: Mapping[str, str], tree: str | None, pipes: bool
    ) -> asyncio.subprocess.Process:
        """`start`; with `pipes`, its stdin and stdout are pipes to this process."""
        with os.fdopen(open_log(self.log_dir / f"{name}.log"), "ab") as log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "temporal_crashtest._process_groups",
                str(os.getpid()),
                *args,
                cwd=tree if tree is not None else self.cwd,
                env={**self.base_env, **env},
                stdin=asyncio.subprocess.PIPE if pipes else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE if pipes else log,
                stderr=log,
            )
        self.running[proc.pid] = proc
        return proc

    async def start_command(
        self,
        name: str,
        command: Sequence[str],
        tree: str | None,
        env: Mapping[str, str],
        drop: tuple[str, ...] = (),
        token: str | None = None,
    ) -> asyncio.subprocess.Process:
        """Start `command` (a worker of any SDK) in a process group of its own, with `token` in
        its environment (`TOKEN_ENV`), so that it and whatever it starts, in its group or not,
        are killed together (`kill_group`); in source tree `tree` if given; its output goes to
        `name`.log; it dies with this process (`dying_with_me`). The variables of this process's
        environment that start with one of `drop` are left out."""
        inherited = {k: v for k, v in self.base_env.items() if not k.startswith(drop)}
        program = shutil.which(command[0], path=env.get("PATH") or self.base_env.get("PATH"))
        if program is None:
            raise InputError(f"the worker command {shown(command[0])}: no such program")
        marked = {TOKEN_ENV: token} if token else {}
        with os.fdopen(open_log(self.log_dir / f"{name}.log"), "ab") as log:
            proc = await asyncio.create_subprocess_exec(
                *dying_with_me([program, *command[1:]]),
                cwd=tree if tree is not None else self.cwd,
                env={**inherited, **env, **marked},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self.running[proc.pid] = proc
        if token:
            self.tokens[proc.pid] = token
        return proc

    async def start_fork_server(
        self,
        args: list[str],
        tree: str | None = None,
        name: str = "forkserver",
        import_timeout_s: float = IMPORT_TIMEOUT_S,
    ) -> str | None:
        """Start a fork server for the workers of source tree `tree` (`args`: what it
        imports); None once it is ready, else why it cannot fork (the workers are then started
        afresh), its imports not done within `import_timeout_s` among the reasons."""
        command = ["-m", "temporal_crashtest._run.forkserver", str(os.getpid()), *args]
        proc = await self._spawn(name, command, {}, tree, pipes=True)
        assert proc.stdin is not None and proc.stdout is not None
        server = ForkServer(proc, proc.stdin, proc.stdout)
        return await self._use(server, tree, import_timeout_s)

    async def adopt_fork_server(self, forked: ForkedServer) -> str | None:
        """Use the fork server this process forked (`_forkserver.fork_here`), for `cwd`."""
        server = await ForkServer.adopt(forked.pid, forked.requests_fd, forked.answers_fd)
        self.running[forked.pid] = server.proc
        return await self._use(server, None)

    async def _use(
        self, server: ForkServer, tree: str | None, timeout_s: float = IMPORT_TIMEOUT_S
    ) -> str | None:
        why = await server.ready(timeout_s)
        if why is None:
            self.forks[tree] = server
        else:
            await self.stop(server.proc)
        return why

    def forking(self, tree: str | None) -> bool:
        """Whether the fork server of source tree `tree` runs."""
        forks = self.forks.get(tree)
        return forks is not None and forks.proc.returncode is None

    async def start_worker(
        self, name: str, args: list[str], tree: str | None = None, **env: str
    ) -> Child:
        """`python <args>` (a worker's, of source tree `tree`), forked if that tree's fork
        server runs, else started afresh."""
        forks = self.forks.get(tree)
        if forks is None or not self.forking(tree):
            return await self.start(name, args, tree, **env)
        if args[:2] != ["-m", "temporal_crashtest.worker"]:
            raise ValueError(f"the fork server forks workers only, not {args[:2]}")
        child = await forks.fork(self.log_dir / f"{name}.log", args[2:], env)
        self.running[child.pid] = child
        return child

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def last_line(self, name: str) -> str:
        """The last line a process wrote (read from the end of its log: a worker that printed
        megabytes is not read whole)."""
        path = self.log_dir / f"{name}.log"
        try:
            with path.open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - TAIL_BYTES))
                tail = log.read().decode(errors="replace")
        except OSError:
            tail = ""
        lines = tail.strip().splitlines()
        return lines[-1][-TAIL_BYTES // 16 :] if lines else "(no output)"

    async def wait(self, proc: Child, limit_s: float | None) -> int:
        """Its exit code, once it has exited (stopped if `limit_s` runs out first: TimeoutError;
        None: no limit); it is no longer tracked."""
        try:
            code = await asyncio.wait_for(proc.wait(), limit_s)
        except TimeoutError:
            await self.stop(proc)
            raise
        self.running.pop(proc.pid, None)
        return code

    async def run(
        self, name: str, args: list[str], limit_s: float, tree: str | None = None, **env: str
    ) -> int:
        return await self.wait(await self.start(name, args, tree, **env), limit_s)

    async def stop(self, proc: Child, grace: float = 10) -> None:
        """SIGTERM (a graceful stop), then SIGKILL if it does not go; a worker command's whole
        group, and what it started outside it (`kill_group`)."""
        token = self.tokens.pop(proc.pid, None)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                if token:
                    os.killpg(proc.pid, signal.SIGTERM)
                else:
                    proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if token:
            self.escaped += kill_group(proc.pid, token)
        self.running.pop(proc.pid, None)

    def kill(self, proc: Child) -> None:
        """SIGKILL it now: a worker command's whole group, and what it started outside it."""
        token = self.tokens.get(proc.pid)
        if token:
            self.escaped += kill_group(proc.pid, token)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()

    def kill_all(self) -> None:
        for child in list(self.running.values()):
            token = self.tokens.pop(child.pid, None)
            if token:
                self.escaped += kill_group(child.pid, token)
            with contextlib.suppress(ProcessLookupError):
                child.kill()
        self.running.clear()

    async def kill_all_and_reap(self) -> None:
        """`kill_all`, then wait for every child, so none is left for a closed event loop."""
        children = list(self.running.values())
        self.kill_all()
        await asyncio.gather(*(child.wait() for child in children))
