"""`python -m temporal_crashtest run`: crash-test a Temporal workflow at every boundary.

    python -m temporal_crashtest run --worker MODULE:FACTORY --workflow MODULE:CLASS \\
        --input JSON (--observe MODULE:FUNC | --http [HOSTS] | both) [OPTIONS]

The options are listed above; each is declared once (`_front/options.py`, and beside what it
belongs to), and crashtest/docs/options.md is written from the same declarations.

FACTORY(client, task_queue) -> Worker builds your worker on the client it is given (which
carries crashtest's interceptor); or a list of Workers, one per task queue the process serves
(another queue made from the one given: f"{task_queue}-notify"). OBSERVE(workflow_id) -> JSON
returns your view of a run's final state (your rows, run-specific ids masked), given the root
workflow id; --http records the effectful HTTP requests the workers send instead, or as well.
DRIVE(handle) sends the signals and updates the run waits for; it runs beside every run. Each
may be sync or async.
Worker processes inherit this command's working directory and environment.

Boundaries are the activities and local activities of the run's whole tree: child workflows at
any depth and every run of a continue-as-new chain. Crash points are MOMENT:N, each moment of
`_points.Moment` (`--points` lists them, with what dies at each), N a position, an activity type
such as charge#2, or a boundary's label (effect:N.K: the K-th effect inside N); a *R suffix
crashes R workers in a row at the point.

Recoveries are fast-forwarded: the attempts a killed worker held are failed at once (retried under
their own retry policy), runs are taken off its sticky queue, and cells run with a 1 s workflow
task timeout; the report says what production would have waited on. --real-timeouts waits for
the server's own timeouts instead.

Points are crashed several to a run: the first worker is killed at a group's first point, the
worker that takes over at the next, and so on; a group whose run ends in the no-crash state
clears its points, one that does not is split down to single points, so each failing point gets
a row of its own. --exact makes one run per point (the same verdicts, for an observer that shows
every effect; see the guide). --junit-xml writes a testcase per point; with GITHUB_ACTIONS=true,
each failing point is also an ::error line.

Exit 0: every crash point ends in the no-crash state (and the reference is what --expect says);
1: some do not, or the reference differs from --expect; 2: bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

from temporal_crashtest._errors import CrashTestError
from temporal_crashtest._exits import EXIT_ALL_MATCH, EXIT_BAD_INPUT, EXIT_SOME_DIFFER, exit_now
from temporal_crashtest._front.api import check_target, crash_test
from temporal_crashtest._front.options import CrashTestOptions, add_flags, values_from
from temporal_crashtest._front.scaffold import scaffold
from temporal_crashtest._loading import load_callable
from temporal_crashtest._observers.given import check_given, settings_from
from temporal_crashtest._option import Part
from temporal_crashtest._plan.target import Observe, Target, Version
from temporal_crashtest._process_groups import kill_strays
from temporal_crashtest._report.formats import (
    add_format_flags,
    check_outputs,
    print_reports,
    write_reports,
)
from temporal_crashtest._report.input import read_report
from temporal_crashtest._report.merge import merge_reports
from temporal_crashtest._report.report import Cell, Report
from temporal_crashtest._run.forkserver import fork_here
from temporal_crashtest._run.processes import ForkedServer, NotForked
from temporal_crashtest._text import ArgumentParser, shown, span_text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: `run` and its flags (what to test, which points, where the server is,
    what to write)."""
    return command_line()[0].parse_args(argv)


def command_line() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The parser, and its `run` command's."""
    parser = ArgumentParser(
        prog="python -m temporal_crashtest",
        description=__doc__.splitlines()[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2] if __doc__ else None,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="crash-test a workflow at every activity boundary")
    add_flags(run)
    merge = sub.add_parser(
        "merge", help="merge the JSON reports of a crash test's shards (--shard K/N) into one"
    )
    merge.add_argument("reports", nargs="+", type=Path, help="each shard's --json report")
    add_format_flags(merge)
    scaffold = sub.add_parser(
        "scaffold",
        help="write the hooks file for a workflow: the worker factory from its code, a drive "
        "stub when it takes signals or updates; then run the command it prints",
    )
    scaffold.add_argument("workflow", help="MODULE:CLASS, a @workflow.defn class")
    scaffold.add_argument(
        "--out", type=Path, default=Path("crash_hooks.py"), help="where (default crash_hooks.py)"
    )
    scaffold.add_argument("--force", action="store_true", help="replace the file if it exists")
    return parser, run


def say(text: str) -> None:
    print(f"crashtest: {shown(text)}", file=sys.stderr, flush=True)


def progress(done: int, total: int, cell: Cell) -> None:
    mark = "-" if cell.not_reached else "✓" if cell.matches else "✗"
    what = f"  {shown(cell.diff)}" if cell.diff else ""
    what = "  not reached: no verdict (listed as not tested)" if cell.not_reached else what
    span = cell.skipped()
    skipped = f", {span_text(span)} of workflow time" if span else ""
    print(
        f"[{done:>3}/{total}] {cell.crash_at:<20} {shown(cell.activity)[:40]:<40} {mark} "
        f"{cell.seconds:5.1f} s{skipped}{what}",
        file=sys.stderr,
        flush=True,
    )


def from_args(args: argparse.Namespace) -> tuple[Target, Observe | None, CrashTestOptions]:
    """The one call's arguments, every one checked before anything starts."""
    check_outputs(args)
    new = values_from(args, Part.NEW)
    target = Target(
        **values_from(args, Part.TARGET),
        old=Version(**values_from(args, Part.OLD)),
        new=Version(**new) if any(new.values()) else None,
    )
    given = {
        **values_from(args, Part.RUN),
        "observers": settings_from(args),
        "progress": progress,
        "say": say,
        # the HTML report draws them; a shard's JSON keeps them for `merge --html`
        "timelines": args.html is not None or (args.shard is not None and args.json is not None),
    }
    options = CrashTestOptions(**given)
    options.check()
    observe = values_from(args, Part.CALL)["observe"]
    check_given(observe, options.observers)
    check_target(target)
    return target, load_callable(observe, "--observe") if observe else None, options


STOP_GRACE_S = 5.0  # after SIGINT or SIGTERM, how long the test may take to clean up


def _stop_on_signals() -> list[int]:
    """SIGINT (Ctrl-C) or SIGTERM: stop the test, its workers and its dev server; if that has not
    ended the process within STOP_GRACE_S (or at a second signal), exit at once (the workers and
    the dev server die with this process: they asked Linux to). The handler and the grace's
    timer need no event loop: a user's async function that blocks the loop (a sync call inside
    `async def`) cannot keep the tool alive. Returns the list the signal that stopped it goes
    into."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    stopped: list[int] = []

    def now(sig: int) -> None:
        with contextlib.suppress(Exception):  # stderr gone, or a write it interrupted
            print(f"crashtest: stopped by signal {sig}; exiting now", file=sys.stderr, flush=True)
        os._exit(128 + sig)

    def on_signal(sig: int, _frame: object) -> None:
        if stopped:
            now(sig)
        stopped.append(sig)
        grace = threading.Timer(STOP_GRACE_S, now, args=(sig,))
        grace.daemon = True
        grace.start()
        loop.call_soon_threadsafe(task.cancel)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    return stopped


async def main(
    args: argparse.Namespace,
    target: Target,
    observe: Observe | None,
    options: CrashTestOptions,
    forked: ForkedServer | NotForked,
) -> int:
    stopped = _stop_on_signals()
    try:
        report = await crash_test(target, observe, options, forked)  # it says where logs are
    except asyncio.CancelledError:
        if not stopped:
            raise
        return 128 + stopped[0]
    finally:
        if left := kill_strays():  # started by the user's code, imported here: not a worker
            say(
                f"{len(left)} process(es) the workers' code started when it was imported here "
                f"were still running (pid {', '.join(map(str, left))}): killed"
            )
    return finish(args, report)


def finish(args: argparse.Namespace, report: Report) -> int:
    """Print the report (table, notes, summary; GitHub's lines), write the files asked for, and
    the exit code."""
    print_reports(report)
    failed = write_reports(args, report)
    if report.logs:
        say(f"the workers' logs are in {report.logs}")
    for why in failed:
        print(f"crashtest: error: {shown(why)}", file=sys.stderr)
    if failed:
        return EXIT_BAD_INPUT
    return EXIT_ALL_MATCH if report.ok else EXIT_SOME_DIFFER


def merge(args: argparse.Namespace) -> int:
    """`merge`: the shards' reports as one, printed and written as `run` does."""
    check_outputs(args)
    report = merge_reports([(str(path), read_report(path)) for path in args.reports])
    return finish(args, report)


def cli() -> None:
    # As `python -m` does: the working directory's modules are importable (the installed
    # `temporal-crashtest` script's own folder is on sys.path instead).
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    args = parse_args()
    try:
        if args.command == "merge":
            exit_now(merge(args))
        if args.command == "scaffold":
            print(scaffold(args.workflow, args.out, force=args.force))
            exit_now(EXIT_ALL_MATCH)
        target, observe, options = from_args(args)
        # The workers' code is imported now, and no thread runs yet: fork the fork server here
        # (a worker command is started as it is, but crashtest's own Python worker).
        forked = fork_here() if target.old.forked_factory else NotForked("")
        code = asyncio.run(main(args, target, observe, options, forked))
    except CrashTestError as err:
        print(f"crashtest: error: {shown(err)}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    except KeyboardInterrupt:  # before the event loop took SIGINT over
        code = 128 + signal.SIGINT
    exit_now(code)
