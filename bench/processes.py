"""Worker processes for the benchmarks, and their memory."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path

from store.config import PROJECT_ROOT


async def start_worker(queue: str, log: Path, **env: str) -> asyncio.subprocess.Process:
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "worker.py",
            cwd=PROJECT_ROOT,
            env={
                **{k: v for k, v in os.environ.items() if k != "CRASH_AT"},
                "TASK_QUEUE": queue,
                **env,
            },
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident memory (VmHWM), in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None
