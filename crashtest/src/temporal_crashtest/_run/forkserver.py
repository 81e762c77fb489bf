"""Worker processes forked from one process that imported temporalio and the user's code once.

A crash test starts two or more worker processes per cell. Each started afresh spends a second or
more of CPU importing temporalio and the user's modules (2.6 s for an OpenAI Agents SDK worker),
on a machine whose cores the server and every other cell share. A fork server imports them once,
then forks a worker per request: a forked worker is a fresh process (its own memory, its own
Temporal client and Rust runtime, created after the fork) that needs no import.

Forking is safe only while the forking process has a single thread (a fork copies just the
calling thread; a lock another thread held stays locked forever in the child). The fork server
checks that after the imports, and refuses (`{"unsafe": WHY}`) when the user's modules started a
thread: the crash test then starts every worker afresh, as it would without a fork server.

The protocol, one JSON object per line. Requests on the server's input:
`{"log": PATH, "args": [worker args], "env": {NAME: VALUE}}`; answers on its output, in order:
`{"ready": true}` once the imports are done, `{"pid": N}` per request, and `{"exited": N,
"code": C}` when a worker ends (C: its exit status, or minus the signal that ended it).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from pathlib import Path
from typing import IO, Any

from temporal_crashtest._errors import InputError
from temporal_crashtest._exits import exit_now
from temporal_crashtest._files import open_log
from temporal_crashtest._loading import load_callable, load_data_converter, load_plugins
from temporal_crashtest._process_groups import die_with_parent
from temporal_crashtest._run.processes import CANNOT_IMPORT, ForkedServer, NotForked
from temporal_crashtest._text import ArgumentParser

REAP_EVERY_S = 0.02  # how soon a worker's end is reported


def import_target(factory: str, data_converter: str | None, plugins: list[str]) -> None:
    """Import everything a worker process of this target imports before it connects."""
    from temporal_crashtest._worker.process import watch_effects

    watch_effects()  # before the user's code imports a library's names
    load_callable(factory, "--worker")
    load_data_converter(data_converter)
    load_plugins(plugins, build=False)  # each forked worker builds its own, once


def _hash_the_code() -> None:
    """Hash the loaded code into the default build id once: a Worker given no build id hashes
    every loaded module's code (0.15 s of CPU per worker); the hash is kept for the process, so
    each fork inherits it. The hash is `temporalio.worker._worker.load_default_build_id` (not
    public; temporalio 1.35-1.x): without it each worker hashes for itself, as it would anyway."""
    import temporalio.worker._worker as sdk_worker

    hash_the_code = getattr(sdk_worker, "load_default_build_id", None)
    if callable(hash_the_code):
        hash_the_code()


def fork_here() -> ForkedServer | NotForked:
    """Fork a fork server from this process, which has imported the workers' code already (the
    crash test's command, before it starts any thread), or say why this process cannot."""
    unsafe = why_unsafe()
    if unsafe is not None:
        return NotForked(unsafe)
    requests_in, requests_out = os.pipe()
    answers_in, answers_out = os.pipe()
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        os.close(requests_in)
        os.close(answers_out)
        return ForkedServer(pid, requests_out, answers_in)
    try:
        os.close(requests_out)
        os.close(answers_in)
        die_with_parent(parent)
        from temporal_crashtest._worker.process import watch_effects

        watch_effects()  # here, not in the crash test: its own commits are no effects
        _hash_the_code()
        with os.fdopen(requests_in, "r") as requests, os.fdopen(answers_out, "w") as answers:
            _answer(answers, {"ready": True})
            serve(requests, answers)
    finally:
        os._exit(0)


def why_unsafe() -> str | None:
    """Why this process cannot fork safely now (None: it can): the threads running besides this
    one, by name, and how to keep them from starting."""
    others = _other_threads()
    if not others:
        return None
    counted: dict[str, int] = {}
    for name in others:
        counted[name] = counted.get(name, 0) + 1
    named = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in counted.items())
    return f"{len(others) + 1} threads run after the imports ({named}): {_advice(others)}"


def _other_threads() -> list[str]:
    """The names of the threads besides the calling one: a Python thread's name, else the
    kernel's (a native library's thread: OpenBLAS's, gRPC's, a Rust runtime's)."""
    import threading

    me = threading.get_native_id()
    python = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # no /proc: Python's own threads only
        return [name for tid, name in python.items() if tid != me]
    names = []
    for tid in sorted(t for t in tids if t != me):
        if tid in python:
            names.append(f"Python thread {python[tid]!r}")
            continue
        try:
            comm = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
        except OSError:
            comm = "?"
        names.append(f"native thread {comm!r}")
    return names


def _advice(names: list[str]) -> str:
    """What keeps such threads from starting before the fork."""
    text = " ".join(names).lower()
    tips = []
    if any(k in text for k in ("blas", "omp", "mkl", "numexpr")):
        tips.append(
            "a math library's thread pool (numpy, pandas, scipy): set OPENBLAS_NUM_THREADS=1 "
            "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 for the crash test, or import it inside the "
            "activity that uses it"
        )
    if "tokio" in text:
        tips.append("a Temporal client or runtime made at import: make it in the worker factory")
    if "python thread" in text or not tips:
        tips.append(
            "a module that starts a thread when imported: start it in the worker factory, or "
            "move the import into the function that uses it"
        )
    return "; ".join(tips)


def _answer(out: IO[str], message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def _run_worker(request: dict[str, Any]) -> int:
    """In the forked child: become the worker process the request describes."""
    from temporal_crashtest._worker import process as worker

    log = open_log(Path(request["log"]))
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.environ.update(request.get("env", {}))
    return worker.run(list(request["args"]))


def _fork(request: dict[str, Any], parent: int) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        die_with_parent(parent)
        code = _run_worker(request)
    except BaseException as err:  # nothing may return into the fork server's loop
        print(f"crashtest.forkserver: the worker failed to start: {err!r}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(code)
    exit_now(code)  # as a worker started afresh ends


def _reap(out: IO[str]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        _answer(out, {"exited": pid, "code": code})


def serve(requests: IO[str], out: IO[str]) -> None:
    """Fork a worker per request until the requests end; then wait for every worker to end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the crash test stops its workers
    me = os.getpid()
    buffered = ""
    fd = requests.fileno()
    while True:
        ready, _, _ = select.select([fd], [], [], REAP_EVERY_S)
        _reap(out)
        if not ready:
            continue
        chunk = os.read(fd, 65536).decode()
        if not chunk:
            break
        buffered += chunk
        while "\n" in buffered:
            line, buffered = buffered.split("\n", 1)
            if line.strip():
                _answer(out, {"pid": _fork(json.loads(line), me)})
    # The crash test is gone: its workers die with this process (see `die_with_parent`).


def main() -> None:
    """`python -m temporal_crashtest._run.forkserver PARENT_PID --worker M:F [--data-converter M:N]
    [--plugin M:N]...`"""

    parser = ArgumentParser(prog="python -m temporal_crashtest._run.forkserver")
    parser.add_argument("parent", type=int)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--data-converter")
    parser.add_argument("--plugin", action="append", default=[])
    args = parser.parse_args()
    die_with_parent(args.parent)
    try:
        import_target(args.worker, args.data_converter, args.plugin)
    except InputError as err:
        _answer(sys.stdout, {"unsafe": f"{CANNOT_IMPORT}{err}"})
        os._exit(0)
    unsafe = why_unsafe()
    if unsafe is not None:
        _answer(sys.stdout, {"unsafe": unsafe})
        os._exit(0)
    _hash_the_code()
    _answer(sys.stdout, {"ready": True})
    serve(sys.stdin, sys.stdout)
    os._exit(0)


if __name__ == "__main__":
    main()
