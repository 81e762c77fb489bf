"""`python -m temporal_crashtest.worker --worker MODULE:FACTORY --task-queue Q [--crash-at POINT]`

Runs the user's worker, built by their own `FACTORY(client, task_queue) -> Worker` on a client
that carries crashtest's interceptor: it stamps every boundary, and SIGKILLs the process at
`--crash-at` when given (a position in the root's first run, e.g. `after-effect:3`, or the JSON
of a `CrashSite`). The crash test starts one of these
that SIGKILLs itself at a boundary, then a fresh one that finishes the run; a person can run it
by hand just the same. SIGTERM or Ctrl-C stops it gracefully (exit 0).

With `--warm` it connects and builds the worker, prints WARM, and starts polling only when it gets
SIGUSR1: the crash test starts the worker that takes over from a killed one this way, before the
kill, so that it polls within milliseconds of it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from datetime import timedelta

from temporalio.worker import Worker

from temporal_crashtest._connect import connect
from temporal_crashtest._errors import CrashPointError, InputError, ServerUnreachable
from temporal_crashtest._exits import EXIT_BAD_INPUT, exit_now
from temporal_crashtest._loading import call, load_callable, load_data_converter, load_plugins
from temporal_crashtest._points.points import SYNTAX
from temporal_crashtest._points.sites import CrashSite
from temporal_crashtest._process_groups import die_with_parent
from temporal_crashtest._text import ArgumentParser
from temporal_crashtest._worker.commits import install as watch_commits
from temporal_crashtest._worker.effects import follow_into_threads
from temporal_crashtest._worker.halves import install_all
from temporal_crashtest._worker.http import install as watch_requests
from temporal_crashtest._worker.interceptor import CrashInterceptor
from temporal_crashtest._worker.replay import replay_cuts, replay_file, write_replayed
from temporal_crashtest._worker.status import StatusWriter
from temporal_crashtest._worker.task_failures import report_task_failures

PARENT_PID_ENV = "CRASHTEST_PARENT_PID"
# Printed for a person (and sent on --status for the crash test) once the worker polls its task
# queue: the crash test waits for it before it judges a queue that nobody polls (a worker that is
# slow to start on a loaded machine is not a broken one).
READY = "crashtest worker ready:"
WARM = "crashtest worker warm:"
GO = signal.SIGUSR1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m temporal_crashtest.worker", description=__doc__)
    parser.add_argument("--worker", required=True, help="MODULE:FACTORY")
    # From the environment as a worker command reads them (`run --worker-cmd`), if not given.
    queue = os.environ.get("TEMPORAL_TASK_QUEUE")
    parser.add_argument("--task-queue", required=queue is None, default=queue)
    parser.add_argument("--address", default=os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233"))
    parser.add_argument("--namespace", default=os.environ.get("TEMPORAL_NAMESPACE", "default"))
    parser.add_argument("--data-converter", help="MODULE:NAME of a temporalio DataConverter")
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        help="MODULE:NAME of a temporalio client Plugin (repeatable)",
    )
    parser.add_argument("--crash-at", help=f"{SYNTAX}; or a CrashSite as JSON")
    parser.add_argument("--workflow-id", help="crash only in this workflow")
    parser.add_argument(
        "--task-timeout-s",
        type=float,
        help="start child workflows and continue-as-new runs with this workflow task timeout",
    )
    parser.add_argument(
        "--status",
        help="a FIFO the crash test reads this worker's state from "
        "(warm, ready, the crash), as JSON lines",
    )
    parser.add_argument(
        "--warm", action="store_true", help="build the worker, then poll only after SIGUSR1"
    )
    parser.add_argument(
        "--replay",
        help="a JSON file of history cuts (see _replay): build the worker, replay each against "
        "its workflows instead of polling, write the results to FILE.out, and exit",
    )
    return parser.parse_args(argv)


def watch_effects() -> None:
    """Every effect an activity makes, a crash point (`effect:N.K`): its committed database
    writes and its answered HTTP requests, in whatever thread it hands them to; before the
    user's code imports a library's names."""
    watch_commits()
    watch_requests()
    follow_into_threads()


async def serve(args: argparse.Namespace) -> int:
    point = CrashSite.parse(args.crash_at) if args.crash_at else None
    watch_effects()
    factory = load_callable(args.worker, "--worker")
    converter = load_data_converter(args.data_converter)
    task_timeout = timedelta(seconds=args.task_timeout_s) if args.task_timeout_s else None
    status = StatusWriter(args.status)
    go = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(GO, go.set)
    report_task_failures(status)
    install_all()  # the crash test's observers that asked for a half in the worker
    client = await connect(
        args.address,
        namespace=args.namespace,
        data_converter=converter,
        interceptors=[CrashInterceptor(point, args.workflow_id, task_timeout, status)],
        plugins=load_plugins(args.plugin),
    )
    workers = checked_workers(await call(factory, client, args.task_queue), args, client)
    if args.replay:
        rows, out = replay_file(args.replay)
        write_replayed(out, await replay_cuts(workers, client, rows))
        return 0
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if args.warm and not await _warm_until_told(args.task_queue, status, go, stop):
        return 0
    facts = _facts(workers, client.identity)
    async with contextlib.AsyncExitStack() as running:
        for each in workers:
            await running.enter_async_context(each)
        crash = f", will SIGKILL itself at {point}" if point else ""
        queues = ", ".join(w.task_queue for w in workers)
        print(
            f"{READY} pid {os.getpid()}, task queue(s) {queues}{crash}; {json.dumps(facts)}",
            file=sys.stderr,
            flush=True,
        )
        status.send("ready", **facts)
        await stop.wait()
    return 0


async def _warm_until_told(
    task_queue: str, status: StatusWriter, go: asyncio.Event, stop: asyncio.Event
) -> bool:
    """Built and connected, not yet polling: say so, then wait to be told to go (True) or to
    stop (False)."""
    print(f"{WARM} pid {os.getpid()}, task queue {task_queue}", file=sys.stderr, flush=True)
    status.send("warm")
    waits = [asyncio.ensure_future(go.wait()), asyncio.ensure_future(stop.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for waiting in waits:
        waiting.cancel()
    return not stop.is_set()


def _facts(workers: list[Worker], client_identity: str) -> dict[str, object]:
    """What the crash test learns of a ready worker: its identity, sticky queue timeout, task
    queues and (Worker Versioning) the build id of the deployment version it is."""
    config = workers[0].config()
    sticky = config.get("sticky_queue_schedule_to_start_timeout")
    deployment = config.get("deployment_config")
    versioned = deployment is not None and deployment.use_worker_versioning
    return {
        "identity": config.get("identity") or client_identity,
        "sticky_s": sticky.total_seconds() if sticky is not None else None,
        "task_queues": [w.task_queue for w in workers],
        "build_id": deployment.version.build_id if deployment and versioned else None,
    }


def checked_workers(built: object, args: argparse.Namespace, client: object) -> list[Worker]:
    """What the factory built: one Worker, or several (one per task queue the process serves),
    every one on the client it was given (which carries the crash interceptor). One polls the
    task queue it was given; another's queue must be made from it (`f"{task_queue}-notify"`), so
    that crash tests running at once never share one."""
    workers = list(built) if isinstance(built, list | tuple) else [built]
    what = f"--worker {args.worker!r}"
    if not workers or not all(isinstance(w, Worker) for w in workers):
        kinds = ", ".join(type(w).__name__ for w in workers) or "nothing"
        raise InputError(f"{what} returned {kinds}, not a Worker (or a list of Workers)")
    checked = [w for w in workers if isinstance(w, Worker)]
    queues = [w.task_queue for w in checked]
    if args.task_queue not in queues:
        raise InputError(
            f"{what} built a worker for task queue {queues[0]!r}; it must use the task_queue "
            "it is given"
        )
    for queue in queues:
        if args.task_queue not in queue:
            raise InputError(
                f"{what} built a worker for task queue {queue!r}: a second queue must be made "
                f'from the one given ({args.task_queue!r}), e.g. f"{{task_queue}}-notify", so '
                "that crash tests running at once never share it"
            )
    given = next(w for w in checked if w.task_queue == args.task_queue)
    if not given.config().get("workflows"):
        raise InputError(
            f"{what} built a worker for task queue {args.task_queue!r} that registers no "
            "workflow: the workflow under test starts there, so nothing would ever run it "
            "(pass it in the Worker's workflows=[...])"
        )
    if any(w.client is not client for w in checked):
        raise InputError(
            f"{what} built its worker on another client; it must use the client it is given "
            "(that client carries the crash interceptor)"
        )
    return sorted(checked, key=lambda w: w.task_queue != args.task_queue)


def run(argv: list[str] | None = None) -> int:
    """The worker process's life: its exit code."""
    args = parse_args(argv)
    try:
        return asyncio.run(serve(args))
    except (InputError, CrashPointError, ServerUnreachable) as err:
        print(f"crashtest.worker: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130


def main() -> None:
    parent = os.environ.get(PARENT_PID_ENV)
    die_with_parent(int(parent) if parent else None)
    exit_now(run())
