"""The one call that runs a whole crash test: `run_crash_test(target, observe, options)`.

It checks the target's references load, finds or starts a Temporal server, starts the workers'
fork server, runs the reference (no crash), checks it against `expect`, runs a cell per crash
point, and returns the `Report`. The CLI, the pytest fixture (through the CLI), the crash lab and
the bench all go through it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

from temporal_crashtest._connect import configured, connect, security_for
from temporal_crashtest._errors import (
    CrashTestAborted,
    CrashTestError,
    InputError,
)
from temporal_crashtest._front.options import NOTHING, CrashTestOptions
from temporal_crashtest._history.hazards import deploy_hazards
from temporal_crashtest._loading import load_callable, load_data_converter, load_plugins
from temporal_crashtest._observers import Observers
from temporal_crashtest._observers.given import check_beside_a_command, observers_for
from temporal_crashtest._plan.compare import differences, short, to_json
from temporal_crashtest._plan.reference import CellPoint, Reference
from temporal_crashtest._plan.shards import shard_points
from temporal_crashtest._plan.target import Observe, Target
from temporal_crashtest._points.points import NOT_REACHED, Untested
from temporal_crashtest._process_groups import TOKEN_ENV
from temporal_crashtest._report.report import Cell, Report
from temporal_crashtest._run.cells import Cells, run_cells
from temporal_crashtest._run.devserver import (
    LOCAL_HOSTS,
    LOCAL_SERVER,
    LOCAL_UI_PORT,
    PrivateDevServer,
    listening,
)
from temporal_crashtest._run.processes import CANNOT_IMPORT, ForkedServer, NotForked, Processes
from temporal_crashtest._run.runner import Runner
from temporal_crashtest._run.session import Session
from temporal_crashtest._run.virtual_time import NOT_SKIPPED, starting_client
from temporal_crashtest._run.workers import Workers
from temporal_crashtest._text import SKIPPED_SPAN, shown, span_text
from temporal_crashtest._wire.kill import INSIDE_OFF_THE_WIRE, off_the_wire
from temporal_crashtest._wire.peers import can_tell
from temporal_crashtest._worker.replay import Replayed, summary

REFERENCE_CHARS = 200  # how much of the reference state a progress line shows
NAMES_SHOWN = 8  # boundaries named in the progress line that lists them


def check_target(target: Target) -> None:
    """Load every reference the workers will load, here, once: a typo is one InputError now,
    not a failure in every worker process. A factory in another source tree is checked where it
    is loaded, by its tree's fork server (here, its module name may be another version's)."""
    old, new = target.old, target.new
    if bool(old.factory) == bool(old.command):
        raise InputError("give the worker: --worker MODULE:FACTORY or --worker-cmd COMMAND")
    if new is not None and new.factory and new.command:
        raise InputError("give the deployed version once: --deploy-to or --deploy-cmd")
    if new is not None and not (new.factory or new.command):
        raise InputError("a source tree for the deployed version, and no version deployed")
    trees = ((old.tree, "--worker-tree"), (new.tree if new else None, "--deploy-tree"))
    for tree, flag in trees:
        if tree is not None and not Path(tree).is_dir():
            raise InputError(f"{flag} {shown(tree)}: no such folder")
    if old.on_the_wire or (new is not None and new.on_the_wire):
        _check_command(target)
        if old.tree is None and (forked := old.forked_factory):
            load_callable(forked, "the worker command's --worker")  # imported before the fork
    elif old.tree is None:
        load_callable(old.factory, "the worker factory")
    if new is not None and new.factory and new.tree is None:
        load_callable(new.factory, "the deployed version's worker factory (--deploy-to)")
    load_data_converter(target.data_converter)
    load_plugins(list(target.plugins), build=False)  # built once, by each process that uses them


def _check_command(target: Target) -> None:
    """Worker commands: each program found, grpcio installed; a deploy between a command and a
    Python factory is one line now."""
    deploy = target.deploy
    if deploy is not None and deploy.old.on_the_wire != deploy.new.on_the_wire:
        raise InputError(
            "a deploy between a worker command and a Python factory: give both versions as "
            "commands (--worker-cmd, --deploy-cmd) or both as factories (--worker, --deploy-to)"
        )
    given = [(target.old, "--worker-cmd")] + ([(deploy.new, "--deploy-cmd")] if deploy else [])
    for version, flag in given:
        if shutil.which(version.command[0]) is None:
            raise InputError(f"{flag} {shown(version.command[0])}: no such program")
    if importlib.util.find_spec("grpc") is None:
        raise InputError(
            "a worker command is killed through a gRPC proxy, which needs grpcio: "
            "pip install 'temporal-crashtest[wire]'"
        )


async def run_crash_test(
    target: Target, observe: Observe | None, options: CrashTestOptions | None = None
) -> Report:
    """Crash-test `target` at every boundary of its run (or at `options.points`).

    Args:
        target: the worker factory, the workflow and its input (and the workers' data converter,
            plugins and environment).
        observe: `observe(workflow_id)`, your view of a run's final state (sync or async);
            None with an observer among `options.observers` (the HTTP requests, ...).
        options: how it runs (`CrashTestOptions`); None: the defaults.

    Returns:
        The `Report`: the reference state, one `Cell` per crash point, what was not tested, and
        `ok` when every cell ends in the reference state.

    Raises:
        CrashTestError: or one of its kinds (`InputError`, `CrashPointError`,
            `ServerUnreachable`, `DevServerError`, `CrashTestAborted`), when the test cannot run
            as asked. A cell that differs is a result, not an error.
    """
    return await crash_test(target, observe, options or CrashTestOptions(), NotForked(""))


async def crash_test(
    target: Target,
    observe: Observe | None,
    options: CrashTestOptions,
    forked: ForkedServer | NotForked,
) -> Report:
    """`run_crash_test`, with the fork server the command forked before its event loop started
    (`fork_here`), or why it could not."""
    options.check()
    check_target(target)
    if target.old.on_the_wire:
        check_beside_a_command(options.observers)
    if options.expect_version is not None and target.deploy is None:
        raise InputError(
            f"expecting the {options.expect_version} version's state is for a deploy test "
            "(--deploy-to)"
        )
    log_dir = options.logs or Path(tempfile.mkdtemp(prefix="crashtest-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        observers = observers_for(observe, options.observers, log_dir, options.deadline_s)
        report = await _crash_test(target, observers, options, forked, log_dir)
    except (asyncio.CancelledError, KeyboardInterrupt):
        if options.say is not None:
            options.say(f"stopped; the workers' logs are in {log_dir}")
        raise
    except CrashTestAborted as err:
        raise CrashTestAborted(f"{err}; the workers' logs are in {log_dir}") from None
    except CrashTestError:  # bad input, no server: there is nothing worth keeping
        if options.logs is None:
            shutil.rmtree(log_dir, ignore_errors=True)
        raise
    if report.ok and options.logs is None:
        shutil.rmtree(log_dir, ignore_errors=True)
        return report
    return replace(report, logs=str(log_dir))


@dataclass(frozen=True)
class _Chosen:
    """The crash points a test runs (its shard's share, if sharded), and what it leaves out."""

    points: list[CellPoint]
    untested: list[Untested]
    shard: str | None = None
    plan: tuple[str, ...] = ()  # sharded: every shard's points


async def _crash_test(
    target: Target,
    observers: Observers,
    options: CrashTestOptions,
    forked: ForkedServer | NotForked,
    log_dir: Path,
) -> Report:
    """Find or start a Temporal server, run the reference, then every cell; the workers and a
    private dev server are gone when it returns or raises. The report is made once, at the
    end, from what each step returned."""
    started = time.monotonic()
    say = options.say or (lambda _: None)
    address, namespace, server = _server_for(options, log_dir, say)
    procs = Processes(log_dir, os.environ)
    try:
        runner = await _runner(target, observers, options, forked, procs, address, namespace, say)
        reference = await _references(runner, target, say)
        reference = replace(reference, pinned=options.expect_version)
        replayed = await _replay_pass(runner, target, reference, say)
        expect_diff = None
        if options.expect is not NOTHING:
            expect_diff = differences(to_json(options.expect, "expect"), reference.observed)
        chosen, made = _Chosen([], []), Cells([], 0, 0)
        if expect_diff is None:
            chosen, made = await _run_the_cells(runner, target, reference, options, say)
        cells, unreached = _reached(made.cells)
        untested = [*chosen.untested, *unreached, *(Untested(*row) for row in observers.untested())]
    finally:
        await procs.kill_all_and_reap()
        if server is not None:
            server.stop()
    deployed = reference.deployed
    return Report(
        workflow=target.workflow,
        activities=[b.label for b in reference.boundaries],
        reference=reference.observed,
        cells=cells,
        seconds=round(time.monotonic() - started, 1),
        untested=untested,
        warnings=_warnings(runner, reference, options, procs),
        expect_diff=expect_diff,
        real_timeouts=options.real_timeouts,
        reference_end=reference.end,
        runs=made.runs,
        groups=made.groups,
        deploy_to=str(target.version(deployed=True)) if target.deploy else None,
        deployed_reference=deployed.observed if deployed else None,
        pinned=reference.pinned,
        replay=[r.to_json() for r in replayed],
        shard=chosen.shard,
        plan=list(chosen.plan),
        reference_workflow_id=runner.reference_workflow_id,
        namespace=namespace,
        ui_url=_ui_url(address, server),
        timelines=dict(runner.timelines),
    )


def _warnings(
    runner: Runner, reference: Reference, options: CrashTestOptions, procs: Processes
) -> list[str]:
    """What the user should know: time not skipped, the reference's own notes, what a deploy
    changes that no run fails on, processes that left their group."""
    slow = runner.session.starter is None and not options.real_time
    escaped = [_escaped(procs.escaped)] if procs.escaped else []
    return [
        *([NOT_SKIPPED] if slow else []),
        *reference.tree.warnings,
        *_hazards(reference),
        *escaped,
    ]


def _escaped(pids: list[int]) -> str:
    """What to say of the processes a worker command started that had left its group."""
    return (
        f"{len(pids)} process(es) a worker command started had left its process group (a "
        "setsid, a fork into a session of its own): each killed with it all the same, found by "
        f"the token crashtest puts in the command's environment ({TOKEN_ENV}); a command that "
        "execs its worker (`exec node worker.js`) leaves none"
    )


def _reached(cells: list[Cell]) -> tuple[list[Cell], list[Untested]]:
    """The cells whose run reached their point, and the points none reached, as not tested (a
    point never reached is no verdict). CrashTestAborted when there were points and none was
    reached: a test of none would pass without testing anything."""
    reached = [c for c in cells if c.not_reached is None]
    unreached = [
        Untested(f"{c.crash_at} ({c.activity})", f"{NOT_REACHED}{c.not_reached}")
        for c in cells
        if c.not_reached is not None
    ]
    if cells and not reached:
        raise CrashTestAborted(
            f"none of the {len(cells)} crash points was reached: "
            + "; ".join(f"{u.boundary}: {u.why}" for u in unreached[:3])
        )
    return reached, unreached


async def _replay_pass(
    runner: Runner, target: Target, reference: Reference, say: Callable[[str], None]
) -> list[Replayed]:
    """A deploy test's replay pass of the old version's run on the new version (`_replay`);
    none for worker commands (it replays in a Python worker) or where nothing is deployed."""
    new = target.version(deployed=True)
    if reference.deployed is None:
        return []
    if new.on_the_wire:
        say("no replay pass: it replays in a Python worker; the cells test the deploy")
        return []
    replayed = await runner.replay_pass(reference.tree)
    say(summary(replayed, str(new)))
    return replayed


def _hazards(reference: Reference) -> list[str]:
    """A deploy test's hazards, found in the two versions' runs without a crash."""
    deployed = reference.deployed
    return deploy_hazards(reference.tree, deployed.tree) if deployed else []


async def _runner(
    target: Target,
    observers: Observers,
    options: CrashTestOptions,
    forked: ForkedServer | NotForked,
    procs: Processes,
    address: str,
    namespace: str,
    say: Callable[[str], None],
) -> Runner:
    """The runner of this test's runs, once its fork servers run and its client is connected."""
    deploy = target.deploy
    on_the_wire = target.old.on_the_wire or (deploy is not None and deploy.new.on_the_wire)
    if on_the_wire and security_for(address) and not can_tell():
        raise InputError(
            "a worker command's proxy puts the server's credentials (API key, TLS) on every call, "
            "and this system cannot say which process connects to it (no /proc): it would lend "
            "them to any local process; run the crash test on Linux, or against a dev server"
        )
    forks = asyncio.ensure_future(_start_forks(procs, target, forked, say))
    client = await connect(
        address,
        namespace=namespace,
        data_converter=load_data_converter(target.data_converter),
        plugins=load_plugins(list(target.plugins)),
    )
    await forks
    workers = Workers(
        target=target,
        procs=procs,
        address=address,
        namespace=namespace,
        env=observers.worker_env(),
        client=client,
    )
    horizon = timedelta(days=options.horizon_days)
    starter = None if options.real_time else await starting_client(client, horizon, say)
    session = Session(
        client=client,
        workers=workers,
        drive=options.drive,
        deadline_s=options.deadline_s,
        real_timeouts=options.real_timeouts,
        resume_after_s=options.resume_after_s,
        starter=starter,
        horizon=horizon if starter is not None else None,
    )
    return Runner(session, observers, timelines=options.timelines)


def _ui_url(address: str, server: PrivateDevServer | None) -> str | None:
    """The web UI's address: TEMPORAL_UI_URL, else the local dev server's (a private one has
    none: it runs headless), else not known."""
    given = os.environ.get("TEMPORAL_UI_URL")
    if given:
        return given if given.startswith(("http://", "https://")) else None
    if server is None and address in (f"{h}:{LOCAL_SERVER[1]}" for h in LOCAL_HOSTS):
        return f"http://localhost:{LOCAL_UI_PORT}"
    return None


async def _references(runner: Runner, target: Target, say: Callable[[str], None]) -> Reference:
    """The run without a crash; in a deploy test, the deployed version's too (a crashed run
    may end in either's state)."""
    tree = f" on {target.old}" if target.old.tree else ""
    say(f"reference run of {target.workflow} (no crash){tree}")
    reference = await runner.reference()
    say(f"reference state: {short(reference.observed, REFERENCE_CHARS)}")
    if (span := reference.tree.span()) > SKIPPED_SPAN:
        say(f"the run without a crash covered {span_text(span)} of workflow time (time skipping)")
    for b in reference.boundaries:  # each a crash point (`effect:N.K`)
        if b.effects:
            say(f"{b.label}: {len(b.effects)} effect(s): {', '.join(b.effects)}")
    if reference.end != "completed":  # by design, or not: every cell must end so too
        say(f"the run without a crash ends {reference.end}")
    if target.deploy is None:
        return reference
    new = target.version(deployed=True)
    say(f"reference run of {target.workflow} on the deployed version ({new})")
    deployed = await runner.reference(alone=new)
    say(f"deployed version's reference state: {short(deployed.observed, REFERENCE_CHARS)}")
    return replace(reference, deployed=deployed)


def _server_for(
    options: CrashTestOptions, log_dir: Path, say: Callable[[str], None]
) -> tuple[str, str, PrivateDevServer | None]:
    """The Temporal server's address and namespace: as given, else the Temporal CLI's
    configuration, else a server on the local default port, else a private dev server (returned,
    to be stopped)."""
    settings = {} if options.dev_server else configured()  # the CLI's: environment, profile
    address = None if options.dev_server else options.address or settings.get("target_host")
    namespace = options.namespace or settings.get("namespace") or "default"
    if not address and not options.dev_server and listening(*LOCAL_SERVER):
        address = ":".join(map(str, LOCAL_SERVER))
    if address:
        say(f"Temporal at {address}, namespace {namespace} (every cell's run is in its web UI)")
        return address, namespace, None
    server = PrivateDevServer(log_dir / "temporal-dev-server.log")
    address = server.start()
    why = "as asked" if options.dev_server else f"no Temporal at {':'.join(map(str, LOCAL_SERVER))}"
    say(f"{why}: a private dev server on {address}")
    return address, namespace, server


def _choose(
    reference: Reference, options: CrashTestOptions, on_the_wire: bool, say: Callable[[str], None]
) -> _Chosen:
    """The crash points to test (`--points`, `--repeat`, `--shard`) and what is left out (and,
    `on_the_wire`, what a kill on the wire cannot make)."""
    chosen = list(options.points) if options.points is not None else None
    points, untested = reference.select(chosen, options.repeat)
    if on_the_wire:
        off = {p: why for p in points if (why := off_the_wire(p.site()))}
        points = [p for p in points if p not in off]
        untested += [Untested(f"{p.crash_at} ({p.label})", why) for p, why in off.items()]
        untested.append(Untested("effect:N.K (inside every activity)", INSIDE_OFF_THE_WIRE))
    if options.shard is None or not points:
        return _Chosen(points, untested)
    k, n = options.shard
    plan = tuple(p.crash_at for p in points)
    points = shard_points(points, k, n)
    say(f"shard {k}/{n}: {len(points)} of the {len(plan)} crash points")
    if not points:
        say(f"shard {k}/{n} has no crash point: the {n} shards are more than the points")
    return _Chosen(points, untested, f"{k}/{n}", plan)


async def _run_the_cells(
    runner: Runner,
    target: Target,
    reference: Reference,
    options: CrashTestOptions,
    say: Callable[[str], None],
) -> tuple[_Chosen, Cells]:
    """The crash points chosen, and their cells run."""
    chosen = _choose(reference, options, target.old.on_the_wire, say)
    points = chosen.points
    if not points and chosen.shard is not None:
        return chosen, Cells([], 0, 0)  # a shard with no point: said above
    if not points:  # a test of none would pass without testing anything
        raise CrashTestAborted(
            "there is no crash point to test: "
            + "; ".join(f"{u.boundary}: {u.why}" for u in chosen.untested)
        )
    labels = [b.label for b in reference.boundaries]
    names = ", ".join(labels[:NAMES_SHOWN]) + (
        f", … {labels[-1]}" if len(labels) > NAMES_SHOWN else ""
    )
    say(
        f"{len(reference.boundaries)} boundaries ({names}): {len(points)} crash points, "
        f"{min(options.jobs, len(points))} at a time"
    )
    cells = await run_cells(
        runner,
        points,
        reference,
        options.jobs,
        exact=options.exact or target.deploy is not None,  # each kill on the old version
        progress=options.progress,
        say=say,
    )
    return chosen, cells


async def _start_forks(
    procs: Processes, target: Target, forked: ForkedServer | NotForked, say: Callable[[str], None]
) -> None:
    """The fork server forked from the command, else one started afresh (which imports the
    workers' code again), else none: say why. A version in a source tree of its own has a fork
    server of its own, started in that tree."""
    versions = {
        name: v
        for name, v in (("old", target.version(False)), ("new", target.version(True)))
        if v.forked_factory  # another worker command is started as it is
    }
    here = [v.forked_factory or "" for v in versions.values() if not v.tree]
    if isinstance(forked, ForkedServer):  # it imported this tree's code (none, if none is here)
        why = await procs.adopt_fork_server(forked)
    elif here:
        why = await procs.start_fork_server(_imports(target, here[0]))
        if why is not None:
            whys = [f"in this command, {forked.why}" if forked.why else None]
            whys.append(f"in a fork server started afresh, {why}")
            why = "; ".join(w for w in whys if w)
    else:
        why = None
    if why is not None:
        say(f"every worker starts afresh (none can be forked: {why})")
    for version, v in versions.items():
        if v.tree is None or v.tree in procs.forks:
            continue
        imports = _imports(target, v.forked_factory or "")
        why = await procs.start_fork_server(imports, v.tree, f"forkserver-{version}")
        if why is not None and why.startswith(CANNOT_IMPORT):
            raise InputError(f"the {version} version in {shown(v.tree)}: {why}")
        if why is not None:
            say(f"the {version} version's workers start afresh (none can be forked: {why})")
    if any(v.on_the_wire and procs.forking(v.tree) for v in versions.values()):
        say(
            "the worker command is crashtest's Python worker in this interpreter: each worker "
            "is forked from a fork server, built, and killed on the wire"
        )


def _imports(target: Target, factory: str) -> list[str]:
    """What a fork server for `factory`'s workers imports."""
    imports = ["--worker", factory]
    imports += ["--data-converter", target.data_converter] if target.data_converter else []
    return imports + [f"--plugin={p}" for p in target.plugins]
