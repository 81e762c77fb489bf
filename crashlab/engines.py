"""The crash lab's engines, in one registry: the hand-rolled journal, Temporal and DBOS.

An `Engine` says what the rest of the lab asks of one: its name and its columns' letter in the
matrix, its designs (the matrix's columns, in order) and the default one, the crash points its
cells are crashed at, whether it runs on a Temporal server, how one matrix cell's run is made
(a process per run, killed and resumed; or, for Temporal, one crash test per design), and how a
chaos run starts its fleet and its runs. The command line's choices, the matrix's columns and
every dispatch come from `ENGINES`; a name not in it is one error (`engine_named`).

To add an engine: its runs in `chaos_runs.py` (start, completed, progress), its row below, and
its designs' expected outcomes in `cells.MatrixCell.expected_match`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from temporal_crashtest import Processes

from activities.grocery import KeyStrategy
from crashlab.cells import (
    CRASH_POINTS,
    DBOS_DESIGNS,
    GROCER_ROWS,
    JOURNAL_DESIGNS,
    RESET,
    TEMPORAL_DESIGNS,
    UNCHECKED,
    MatrixCell,
)
from crashlab.chaos_runs import ChaosRuns, DBOSRuns, JournalRuns, TemporalRuns, quiet_runtime
from crashlab.fleet import SLOT, Fleet
from dbos_agent.__main__ import READY_LINE as DBOS_READY
from dbos_agent.agent import KeyDesign
from infra.errors import ConfigError
from infra.temporal_client import connect_temporal
from journal.engine import Design
from journal.resume import READY_LINE as RESUME_READY

JOURNAL_CONCURRENCY = 10  # runs at once in each journal process of a chaos run


@dataclass(frozen=True, kw_only=True)
class ProcessRun:
    """A matrix cell's run as processes: the one killed at the crash point (CRASH_AT), the one
    that resumes it, and the DBOS schema the cell owns (dropped after it), if any."""

    crashing: list[str]
    resuming: list[str]
    schema: str | None = None


@dataclass(frozen=True, kw_only=True)
class ChaosStart:
    """What a chaos run gives an engine to start its fleet and its runs with."""

    procs: Processes
    workers: int
    design: str
    tag: str
    db_url: str
    address: str | None  # Temporal's, for an engine that runs on it


@dataclass(frozen=True, kw_only=True)
class Engine:
    name: str
    letter: str  # its columns' letter in the matrix
    says: str  # the legend's words for it and its columns
    designs: tuple[str, ...]  # the matrix's columns, in order
    default_design: str  # a chaos run's, and the matrix's reference run's
    parse_design: Callable[[str], str]  # a design's name, checked (one clear error if unknown)
    rows: tuple[str, ...]  # the crash points every design is crashed at
    more_cells: tuple[tuple[str, str], ...] = ()  # (design, row) beyond designs x rows
    on_temporal: bool = False  # its runs need a Temporal server (which chaos may restart)
    # A matrix cell's processes, given the run's arguments and id; None: a crash test per design.
    process_run: Callable[[list[str], str], ProcessRun] | None = None
    # A chaos run's settings for its processes, given the design and Temporal's address.
    chaos_env: Callable[[str, str | None], dict[str, str]] = lambda _design, _address: {}
    chaos_runs: Callable[[ChaosStart], Awaitable[ChaosRuns]]

    def cells(self) -> list[MatrixCell]:
        """Its cells of the matrix: every design at every row, then the more cells."""
        every = [(d, row) for d in self.designs for row in self.rows] + list(self.more_cells)
        return [MatrixCell(engine=self.name, design=d, crash_at=row) for d, row in every]

    def columns(self) -> list[str]:
        """Its designs as the matrix shows them: its own, then those of the more cells."""
        return list(dict.fromkeys([*self.designs, *(d for d, _ in self.more_cells)]))


def _journal_process(args: list[str], run_id: str) -> ProcessRun:
    """The journal keeps its own crash lines (CRASH_AT): one command crashes and resumes."""
    command = ["-m", "journal", *args]
    return ProcessRun(crashing=command, resuming=command)


def _dbos_process(args: list[str], run_id: str) -> ProcessRun:
    """The lab's hook around DBOS's step functions crashes; `dbos_agent` resumes. A DBOS
    application per cell (its own schema: processes on one schema share DBOS's queue of
    recovered work, so another cell's process could take this run and exit with it unfinished)."""
    schema = f"dbos_{run_id.rsplit('-', 1)[-1]}"
    args = [*args, "--executor-id", run_id, "--schema", schema]
    return ProcessRun(
        crashing=["-m", "crashlab.dbos_crash", *args],
        resuming=["-m", "dbos_agent", *args],
        schema=schema,
    )


async def _journal_runs(start: ChaosStart) -> ChaosRuns:
    command = ["-m", "journal", "resume", "--until-done", "--concurrency", f"{JOURNAL_CONCURRENCY}"]
    fleet = Fleet(start.procs, "agent", command, start.workers, ready_line=RESUME_READY)
    return JournalRuns(start.db_url, fleet, Design.parse(start.design))


async def _temporal_runs(start: ChaosStart) -> ChaosRuns:
    command = ["-m", "crashlab.worker"]
    fleet = Fleet(start.procs, "worker", command, start.workers, ready_line="worker ready")
    client = await connect_temporal(start.address, runtime=quiet_runtime())
    return TemporalRuns(client, fleet, start.tag)


async def _dbos_runs(start: ChaosStart) -> ChaosRuns:
    """`dbos_agent serve` with the lab's pauses around the step functions (STEP_PAUSE_MS), an
    executor id per slot."""
    command = ["-m", "crashlab.dbos_crash", "serve", "--executor-id", f"{start.tag}-{SLOT}"]
    fleet = Fleet(start.procs, "agent", command, start.workers, ready_line=DBOS_READY)
    return DBOSRuns(start.db_url, fleet, start.design, start.procs)


def _temporal_env(design: str, address: str | None) -> dict[str, str]:
    return {"TEMPORAL_ADDRESS": address or "", "KEY_STRATEGY": design}


def _design_parser(parse: Callable[[str], object]) -> Callable[[str], str]:
    return lambda text: str(parse(text))


ENGINES = {
    e.name: e
    for e in (
        Engine(
            name="journal",
            letter="J",
            says="hand-rolled journal (design)",
            designs=JOURNAL_DESIGNS,
            default_design="durable",
            parse_design=_design_parser(Design.parse),
            rows=CRASH_POINTS,
            process_run=_journal_process,
            chaos_runs=_journal_runs,
        ),
        Engine(
            name="temporal",
            letter="T",
            says="Temporal (key strategy)",
            designs=TEMPORAL_DESIGNS,
            default_design="workflow",
            parse_design=_design_parser(KeyStrategy.parse),
            rows=(*CRASH_POINTS, RESET),
            more_cells=tuple((d, row) for row in GROCER_ROWS for d in ("workflow", UNCHECKED)),
            on_temporal=True,
            chaos_env=_temporal_env,
            chaos_runs=_temporal_runs,
        ),
        Engine(
            name="dbos",
            letter="D",
            says="DBOS (keys from the workflow id and step number, or none)",
            designs=DBOS_DESIGNS,
            default_design="keyed",
            parse_design=_design_parser(KeyDesign.parse),
            rows=CRASH_POINTS,
            process_run=_dbos_process,
            chaos_runs=_dbos_runs,
        ),
    )
}
ALL = "all"  # every engine, for the matrix
CHAOS_DEFAULT = "temporal"  # the engine a chaos run uses unless told: the agent's own


def engine_named(name: str) -> Engine:
    """The engine called `name`; an unknown name is a ConfigError that lists the known ones."""
    if (engine := ENGINES.get(name)) is None:
        raise ConfigError(f"unknown engine {name!r}; the engines: {', '.join(ENGINES)}")
    return engine


def engines_named(name: str) -> list[Engine]:
    """`all`: every engine, in the registry's order; otherwise the one named."""
    return list(ENGINES.values()) if name == ALL else [engine_named(name)]


def all_cells(name: str) -> list[MatrixCell]:
    """The matrix's cells of the engine named (or of every engine: `all`)."""
    return [cell for engine in engines_named(name) for cell in engine.cells()]
