"""Every process the lab starts, tracked by pid, so none outlives the lab."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from store.config import PROJECT_ROOT


class Processes:
    def __init__(self, log_dir: Path, base_env: dict[str, str]) -> None:
        self.log_dir = log_dir
        self.base_env = {k: v for k, v in base_env.items() if k != "CRASH_AT"}
        self.running: dict[int, asyncio.subprocess.Process] = {}
        log_dir.mkdir(parents=True, exist_ok=True)

    async def start(self, name: str, args: list[str], **env: str) -> asyncio.subprocess.Process:
        """Start `python <args>` from the project root; stdout and stderr go to `name`.log."""
        with (self.log_dir / f"{name}.log").open("ab") as log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                *args,
                cwd=PROJECT_ROOT,
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
        """The last line a process wrote (starter.py --json writes its outcome there)."""
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
