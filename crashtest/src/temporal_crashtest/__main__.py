"""`python -m temporal_crashtest run`: crash-test a Temporal workflow at every boundary.

    python -m temporal_crashtest run --worker MODULE:FACTORY --workflow MODULE:CLASS --input JSON \\
        --observe MODULE:FUNC [--drive MODULE:FUNC] [--expect JSON|@FILE] [--points LIST] \\
        [--repeat N] [--plugin MODULE:NAME]... [--data-converter MODULE:NAME] [--json PATH] \\
        [--markdown PATH] [--jobs N] [--address HOST:PORT] [--deadline-s S] [--logs DIR] \\
        [--real-timeouts]

FACTORY(client, task_queue) -> Worker builds your worker on the client it is given (which
carries crashtest's interceptor). OBSERVE(workflow_id) -> JSON returns your view of a run's final
state (your rows, run-specific ids masked), given the root workflow id. DRIVE(handle) sends the
signals and updates the run waits for; it runs beside every run. Each may be sync or async.
Worker processes inherit this command's working directory and environment.

Boundaries are the activities and local activities of the run's whole tree: child workflows at
any depth and every run of a continue-as-new chain. Crash points: after-effect:N,
after-checkpoint:N, reset:N (N a position, an activity type such as charge#2, or a boundary's
label); a *K suffix crashes K workers in a row at the point.

Recoveries are fast-forwarded: the attempts a killed worker held are failed at once (retried under
their own retry policy), runs are taken off its sticky queue, and cells run with a 1 s workflow
task timeout; the report says what production would have waited on. --real-timeouts waits for
the server's own timeouts instead.

Exit 0: every crash point ends in the no-crash state (and the reference is what --expect says);
1: some do not, or the reference differs from --expect; 2: bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporal_crashtest.connect import ServerUnreachable, configured, connect
from temporal_crashtest.devserver import LOCAL_SERVER, DevServerError, PrivateDevServer, listening
from temporal_crashtest.exits import EXIT_ALL_MATCH, EXIT_BAD_INPUT, EXIT_SOME_DIFFER, exit_now
from temporal_crashtest.forkserver import fork_here
from temporal_crashtest.loading import (
    LoadError,
    load_callable,
    load_data_converter,
    load_plugins,
    workflow_type,
)
from temporal_crashtest.points import MAX_REPEAT, CrashPoint, CrashPointError
from temporal_crashtest.processes import Processes
from temporal_crashtest.report import Cell, Report, differences, short
from temporal_crashtest.runner import (
    DEFAULT_DEADLINE_S,
    CrashTestError,
    Drive,
    Observe,
    Runner,
    Target,
    run_cells,
    to_json,
)

REFERENCE_CHARS = 200  # how much of the reference state the progress shows


def default_jobs() -> int:
    """Cells mostly wait (on the server, and on timeouts); their workers are forked, not
    started afresh, so many cells fit on a core."""
    return 8 * (os.cpu_count() or 1)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m temporal_crashtest",
        description=__doc__.splitlines()[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2] if __doc__ else None,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="crash-test a workflow at every activity boundary")
    run.add_argument(
        "--worker", required=True, help="MODULE:FACTORY, (client, task_queue) -> Worker"
    )
    run.add_argument("--workflow", required=True, help="MODULE:CLASS (or the workflow type name)")
    run.add_argument("--input", required=True, help="the workflow's argument, as JSON")
    run.add_argument("--observe", required=True, help="MODULE:FUNC, (workflow_id) -> JSON")
    run.add_argument("--json", type=Path, help="write the report as JSON here")
    run.add_argument("--markdown", type=Path, help="write the table as Markdown here")
    run.add_argument("--jobs", type=int, default=default_jobs(), help="cells run at once")
    run.add_argument("--points", help="only these crash points, comma-separated (reset:N too)")
    run.add_argument("--drive", help="MODULE:FUNC, (handle) -> None: sends signals and updates")
    run.add_argument("--expect", help="the final state a run without a crash must reach: JSON, "
                     "or @FILE")  # fmt: skip
    run.add_argument("--repeat", type=int, default=1,
                     help="crash this many workers in a row at each point (default 1)")  # fmt: skip
    run.add_argument("--data-converter", help="MODULE:NAME of a temporalio DataConverter")
    run.add_argument("--plugin", action="append", default=[], help="MODULE:NAME of a "
                     "temporalio client Plugin (an agent framework's), for every client; "
                     "repeatable")  # fmt: skip
    run.add_argument(
        "--address", help="Temporal's HOST:PORT (default: TEMPORAL_ADDRESS or the Temporal CLI's "
        "profile, with its API key and TLS; else a server on 127.0.0.1:7233, else a private dev "
        "server started for this run)"
    )  # fmt: skip
    run.add_argument("--namespace", help="default: TEMPORAL_NAMESPACE or the profile's, else "
                     "default")  # fmt: skip
    run.add_argument("--deadline-s", type=float, default=DEFAULT_DEADLINE_S, help="per cell")
    run.add_argument("--logs", type=Path, help="keep the workers' logs here (default: a temporary "
                     "folder, removed when every cell matches)")  # fmt: skip
    run.add_argument("--real-timeouts", action="store_true", help="wait for the server's "
                     "timeouts after every kill, as production does (slow)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.deadline_s <= 0:
        parser.error("--deadline-s must be positive")
    if not 1 <= args.repeat <= MAX_REPEAT:
        parser.error(f"--repeat must be 1 to {MAX_REPEAT}")
    return args


@dataclass
class Inputs:
    """Every argument checked before anything starts."""

    target: Target
    observe: Observe
    points: list[str] | None
    drive: Drive | None = None
    expect: Any = None
    has_expect: bool = False


def read_expect(text: str) -> Any:
    """--expect: JSON, or @FILE holding JSON."""
    what = "--expect"
    if text.startswith("@"):
        path = Path(text[1:])
        what = f"--expect {text}"
        try:
            text = path.read_text()
        except OSError as err:
            raise LoadError(f"{what}: cannot read it ({err.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise LoadError(f"{what} is not JSON: {err}") from None


def check_inputs(args: argparse.Namespace) -> Inputs:
    try:
        workflow_input: Any = json.loads(args.input)
    except json.JSONDecodeError as err:
        raise LoadError(f"--input is not JSON: {err}") from None
    load_callable(args.worker, "--worker")  # fail here, not in every worker process
    load_data_converter(args.data_converter)
    load_plugins(args.plugin)
    observe = load_callable(args.observe, "--observe")
    drive = load_callable(args.drive, "--drive") if args.drive else None
    expect = read_expect(args.expect) if args.expect is not None else None
    points = [p.strip() for p in args.points.split(",") if p.strip()] if args.points else None
    for point in points or ():
        CrashPoint.parse(point)
    target = Target(
        worker=args.worker,
        workflow=workflow_type(args.workflow),
        input=workflow_input,
        data_converter=args.data_converter,
        plugins=tuple(args.plugin),
    )
    return Inputs(target, observe, points, drive, expect, args.expect is not None)


def say(text: str) -> None:
    print(f"crashtest: {text}", file=sys.stderr, flush=True)


def progress(done: int, total: int, cell: Cell) -> None:
    mark = "✓" if cell.matches else "✗"
    what = f"  {cell.diff}" if cell.diff else ""
    print(
        f"[{done:>3}/{total}] {cell.crash_at:<20} {cell.activity[:40]:<40} {mark} "
        f"{cell.seconds:5.1f} s{what}",
        file=sys.stderr,
        flush=True,
    )


async def start_forks(procs: Processes, args: argparse.Namespace,
                      forked: tuple[int, int, int] | str) -> None:  # fmt: skip
    """The fork server forked from this command, else one started afresh (which imports the
    workers' code again), else none: say why."""
    if isinstance(forked, tuple):
        why = await procs.adopt_fork_server(*forked)
    else:
        imports = ["--worker", args.worker]
        imports += ["--data-converter", args.data_converter] if args.data_converter else []
        imports += [f"--plugin={p}" for p in args.plugin]
        why = await procs.start_fork_server(imports)
        why = None if why is None else f"{forked}; {why}"
    if why is not None:
        say(f"every worker starts afresh (none can be forked: {why})")


async def crash_test(
    args: argparse.Namespace, inputs: Inputs, log_dir: Path, forked: tuple[int, int, int] | str
) -> Report:
    started = time.monotonic()
    server = None
    settings = configured()  # the Temporal CLI's: environment, profile file
    address = args.address or settings.get("target_host")
    if args.namespace is None:
        args.namespace = settings.get("namespace") or "default"
    if not address and listening(*LOCAL_SERVER):
        address = ":".join(map(str, LOCAL_SERVER))
        say(f"Temporal at {address} (every cell's run is in its web UI)")
    if not address:
        server = PrivateDevServer(log_dir / "temporal-dev-server.log")
        address = server.start()
        say(f"no Temporal at {':'.join(map(str, LOCAL_SERVER))}: a private dev server on {address}")
    procs = Processes(log_dir, os.environ)
    try:
        forks = asyncio.ensure_future(start_forks(procs, args, forked))
        client = await connect(
            address,
            namespace=args.namespace,
            data_converter=load_data_converter(args.data_converter),
            plugins=load_plugins(args.plugin),
        )
        await forks
        runner = Runner(
            client, address, procs, inputs.observe, drive=inputs.drive,
            namespace=args.namespace, deadline_s=args.deadline_s,
            real_timeouts=args.real_timeouts,
        )  # fmt: skip
        target = inputs.target
        say(f"reference run of {target.workflow} (no crash)")
        reference = await runner.reference(target)
        say(f"reference state: {short(reference.observed, REFERENCE_CHARS)}")
        report = Report(
            workflow=target.workflow,
            activities=[b.label for b in reference.boundaries],
            reference=reference.observed,
            cells=[],
            seconds=0.0,
            warnings=list(reference.tree.warnings),
            real_timeouts=args.real_timeouts,
        )
        if inputs.has_expect:
            report.expect_diff = differences(to_json(inputs.expect, "--expect"),
                                             reference.observed)  # fmt: skip
        if report.expect_diff is None:
            points, report.untested = reference.select(inputs.points, args.repeat)
            names = ", ".join(b.label for b in reference.boundaries)
            say(
                f"{len(reference.boundaries)} boundaries ({names}): {len(points)} crash points, "
                f"{min(args.jobs, len(points))} at a time"
            )
            report.cells = await run_cells(runner, target, points, reference, args.jobs, progress)
    finally:
        await procs.kill_all_and_reap()
        if server is not None:
            server.stop()
    report.seconds = round(time.monotonic() - started, 1)
    return report


async def main(args: argparse.Namespace, inputs: Inputs, forks: tuple[int, int, int] | str) -> int:
    log_dir = args.logs or Path(tempfile.mkdtemp(prefix="crashtest-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel, "SIGTERM")
    try:
        report = await crash_test(args, inputs, log_dir, forks)
    except CrashTestError as err:
        raise CrashTestError(f"{err}; the workers' logs are in {log_dir}") from None
    except (CrashPointError, ServerUnreachable):  # bad input: there is nothing worth keeping
        if args.logs is None:
            shutil.rmtree(log_dir, ignore_errors=True)
        raise
    except (KeyboardInterrupt, asyncio.CancelledError):
        say(f"stopped; the workers' logs are in {log_dir}")
        raise
    if report.cells:
        print(report.table())
    if report.notes():
        print(report.notes())
    print(report.summary())
    if args.json:
        report.write_json(args.json)
    if args.markdown:
        args.markdown.write_text(report.table(markdown=True) + "\n")
    if report.ok and args.logs is None:
        shutil.rmtree(log_dir, ignore_errors=True)
    else:
        say(f"the workers' logs are in {log_dir}")
    return EXIT_ALL_MATCH if report.ok else EXIT_SOME_DIFFER


def cli() -> None:
    args = parse_args()
    try:
        inputs = check_inputs(args)
        # The workers' code is imported now, and no thread runs yet: fork the fork server here.
        code = asyncio.run(main(args, inputs, fork_here()))
    except (LoadError, CrashPointError, CrashTestError, ServerUnreachable, DevServerError) as err:
        print(f"crashtest: error: {err}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except asyncio.CancelledError:  # SIGTERM
        code = 128 + signal.SIGTERM
    exit_now(code)


if __name__ == "__main__":
    cli()
