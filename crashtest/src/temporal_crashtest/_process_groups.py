"""The processes a crash test starts, and theirs: a worker command's process group and the
processes that carry its token (`TOKEN_ENV`), killed together (`kill_group`); a process's
children and descendants; strays the user's code started when it was imported (`kill_strays`);
a child that dies with its parent (`die_with_parent`, `dying_with_me`, run through this module
as `python -m temporal_crashtest._process_groups --exec`). Standard library only."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

TOKEN_ENV = "CRASHTEST_WORKER_TOKEN"  # in a worker command's environment: what it started


def carriers(token: str) -> list[int]:
    """The processes whose environment carries `token` (`TOKEN_ENV`): everything a worker
    command started, wherever it went (another process group, another session); none where
    /proc is missing."""
    wanted = f"{TOKEN_ENV}={token}".encode()
    found = []
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.exists() else ():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def kill_group(pid: int, token: str | None = None) -> list[int]:
    """SIGKILL the process group `pid` leads (a worker command and whatever it started), or the
    process `pid` where it leads none (crashtest's Python worker, forked: it starts nothing),
    and every process carrying the command's `token`: the pids of those that had left its
    group (a `setsid`, a fork into a session of its own)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:  # no group of that id: the process alone, if it is there
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    escaped = [p for p in carriers(token) if p != pid] if token else []
    for other in escaped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(other, signal.SIGKILL)
    return escaped


def children(pid: int) -> set[int]:
    """The processes `pid` started, still running (none where /proc is missing)."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def descendants(pid: int) -> set[int]:
    """The processes `pid` started, and theirs, still running."""
    found: set[int] = set()
    waiting = [pid]
    while waiting:
        for child in children(waiting.pop()) - found:
            found.add(child)
            waiting.append(child)
    return found


def kill_strays() -> list[int]:
    """SIGKILL every process this one started that is still running, and theirs, once the crash
    test has stopped all of its own: what the user's code started when it was imported here (a
    module that forks a helper at import); their pids."""
    strays = sorted(descendants(os.getpid()))
    for pid in strays:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return strays


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


def dying_with_me(command: list[str]) -> list[str]:
    """`command` (a program and its arguments) started so that it dies with this process, even
    if this process is SIGKILLed: through this module, which asks for that, then becomes it."""
    me = "temporal_crashtest._process_groups"
    return [sys.executable, "-m", me, str(os.getpid()), EXEC, *command]


EXEC = "--exec"


if __name__ == "__main__":
    # `python -m temporal_crashtest._process_groups PARENT_PID ARGS...`: ask to die with PARENT_PID,
    # then become `python ARGS...` (the request survives exec), so any command can be started
    # this way; `PARENT_PID --exec PROGRAM ARGS...` becomes PROGRAM itself.
    die_with_parent(int(sys.argv[1]))
    if sys.argv[2:3] == [EXEC]:
        os.execv(sys.argv[3], sys.argv[3:])
    os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
