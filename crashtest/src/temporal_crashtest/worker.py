"""`python -m temporal_crashtest.worker --worker MODULE:FACTORY --task-queue Q [--crash-at POINT]`

Runs the user's worker, built by their own `FACTORY(client, task_queue) -> Worker` on a client
that carries crashtest's interceptor: it stamps every boundary, and SIGKILLs the process at
`--crash-at` when given (a position in the root's first run, e.g. `after-effect:3`, or the JSON
of a `CrashSite`). The crash test starts one of these
that SIGKILLs itself at a boundary, then a fresh one that finishes the run; a person can run it
by hand just the same. SIGTERM or Ctrl-C stops it gracefully (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from temporalio.worker import Worker

from temporal_crashtest.connect import ServerUnreachable, connect
from temporal_crashtest.exits import EXIT_BAD_INPUT, exit_now
from temporal_crashtest.interceptor import CrashInterceptor, CrashSite
from temporal_crashtest.loading import (
    LoadError,
    call,
    load_callable,
    load_data_converter,
    load_plugins,
)
from temporal_crashtest.points import CrashPointError
from temporal_crashtest.processes import die_with_parent

PARENT_PID_ENV = "CRASHTEST_PARENT_PID"
# Printed once the worker polls its task queue; the runner waits for it before it judges a queue
# that nobody polls (a worker that is slow to start on a loaded machine is not a broken one).
READY = "crashtest worker ready:"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m temporal_crashtest.worker", description=__doc__
    )
    parser.add_argument("--worker", required=True, help="MODULE:FACTORY")
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--address", default=os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233"))
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--data-converter", help="MODULE:NAME of a temporalio DataConverter")
    parser.add_argument("--plugin", action="append", default=[],
                        help="MODULE:NAME of a temporalio client Plugin (repeatable)")  # fmt: skip
    parser.add_argument("--crash-at", help="after-effect:N, after-checkpoint:N or a CrashSite JSON")
    parser.add_argument("--workflow-id", help="crash only in this workflow")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> int:
    point = CrashSite.parse(args.crash_at) if args.crash_at else None
    factory = load_callable(args.worker, "--worker")
    converter = load_data_converter(args.data_converter)
    client = await connect(
        args.address,
        namespace=args.namespace,
        data_converter=converter,
        interceptors=[CrashInterceptor(point, args.workflow_id)],
        plugins=load_plugins(args.plugin),
    )
    worker = await call(factory, client, args.task_queue)
    if not isinstance(worker, Worker):
        raise LoadError(f"--worker {args.worker!r} returned {type(worker).__name__}, not a Worker")
    if worker.task_queue != args.task_queue:
        raise LoadError(
            f"--worker {args.worker!r} built a worker for task queue {worker.task_queue!r}; "
            "it must use the task_queue it is given"
        )
    if worker.client is not client:
        raise LoadError(
            f"--worker {args.worker!r} built its worker on another client; it must use the "
            "client it is given (that client carries the crash interceptor)"
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        crash = f", will SIGKILL itself at {point}" if point else ""
        print(f"{READY} pid {os.getpid()}, task queue {args.task_queue}{crash}",
              file=sys.stderr, flush=True)  # fmt: skip
        await stop.wait()
    return 0


def main() -> None:
    parent = os.environ.get(PARENT_PID_ENV)
    die_with_parent(int(parent) if parent else None)
    args = parse_args()
    try:
        code = asyncio.run(serve(args))
    except (LoadError, CrashPointError, ServerUnreachable) as err:
        print(f"crashtest.worker: error: {err}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    except KeyboardInterrupt:
        code = 130
    exit_now(code)


if __name__ == "__main__":
    main()
