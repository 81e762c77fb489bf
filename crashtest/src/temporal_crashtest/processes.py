"""Every process a crash test starts, tracked by pid, so none outlives the tool."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path


class Processes:
    """Starts `python ARGS` children with output to `<log_dir>/<name>.log`, and kills them all
    when asked (`kill_all`), whatever state they are in."""

    def __init__(self, log_dir: Path, base_env: Mapping[str, str], cwd: Path | None = None) -> None:
        self.log_dir = log_dir
        self.cwd = cwd  # None: the caller's working directory
        self.base_env = dict(base_env)
        self.running: dict[int, asyncio.subprocess.Process] = {}
        log_dir.mkdir(parents=True, exist_ok=True)

    async def start(self, name: str, args: list[str], **env: str) -> asyncio.subprocess.Process:
        """Start `python <args>`; stdout and stderr go to `name`.log. The child dies with this
        process, even if this process is SIGKILLed (see `die_with_parent`)."""
        with (self.log_dir / f"{name}.log").open("ab") as log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "temporal_crashtest.processes",
                str(os.getpid()),
                *args,
                cwd=self.cwd,
                env={**self.base_env, **env},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        self.running[proc.pid] = proc
        return proc

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def last_line(self, name: str) -> str:
        """The last line a process wrote."""
        lines = self.log(name).strip().splitlines()
        return lines[-1] if lines else "(no output)"

    async def wait(self, proc: asyncio.subprocess.Process, limit_s: float) -> int:
        try:
            code = await asyncio.wait_for(proc.wait(), limit_s)
        except TimeoutError:
            await self.stop(proc)
            raise
        self.running.pop(proc.pid, None)
        return code

    async def run(self, name: str, args: list[str], limit_s: float, **env: str) -> int:
        return await self.wait(await self.start(name, args, **env), limit_s)

    async def stop(self, proc: asyncio.subprocess.Process, grace: float = 10) -> None:
        """SIGTERM (a graceful stop), then SIGKILL if it does not go."""
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        self.running.pop(proc.pid, None)

    def kill_all(self) -> None:
        for pid in list(self.running):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.running.clear()

    async def kill_all_and_reap(self) -> None:
        """`kill_all`, then wait for every child, so none is left for a closed event loop."""
        children = list(self.running.values())
        self.kill_all()
        await asyncio.gather(*(child.wait() for child in children))


def die_with_parent(parent_pid: int | None) -> None:
    """Ask Linux to SIGKILL this process when the process that started it dies, so that a crash
    test killed without warning (SIGKILL, a closed terminal) leaves no worker behind. Called
    first thing by the worker processes themselves; elsewhere than Linux, nothing happens."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the request was made: nobody will stop us


if __name__ == "__main__":
    # `python -m crashtest.processes PARENT_PID ARGS...`: ask to die with PARENT_PID, then become
    # `python ARGS...` (the request survives exec), so any command can be started this way.
    die_with_parent(int(sys.argv[1]))
    os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
