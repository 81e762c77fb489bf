"""A durable-step engine in one table and one function.

`agent_steps` holds one row per finished step, keyed by (run_id, step). When a run starts, its
whole journal is read in ONE query; after that a saved step is replayed from memory, and a new
step costs one INSERT (one round trip, one commit).

Four designs, from weakest to strongest:

- naive          no journal, no keys: a resumed run starts over and repeats everything.
- checkpoint     journal, no keys: a crash after an effect and before its checkpoint repeats it.
- durable        journal + idempotency key f"{run_id}:{n}": the repeat finds the first effect.
- transactional  a step whose effect lives in our own database commits the effect and its
                 checkpoint in one transaction: there is no window between them at all.
                 (Model calls are external, so they still take a key, as in durable.)
- positional     durable, but each step numbered by its place in the run, as the seed's step()
                 counts them: a release that inserts a step moves every later number, and so
                 every later key and saved row (the deploy matrix's weak design; never use it).

Every other design numbers a step by its own number (`agent.steps`), which names it for good:
a step inserted by a later release has a new number and moves no key.

One process runs a run at a time (a lock in Postgres, dropped if the process dies). A `pause`
(STEP_PAUSE_MS) sleeps before each step's work and again inside the crash window, to widen the
windows that random kills land in (the chaos lab).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

import psycopg
from pydantic import BaseModel

from agent.steps import STEPS, Effect, Step
from infra.config import parse_choice
from infra.errors import AgentError, ConfigError
from journal.crash_points import StepCrashPoint, StepMoment, crash_now

T = TypeVar("T", bound=BaseModel)
Pause = tuple[float, float]  # sleep a random low..high seconds (STEP_PAUSE_MS)
log = logging.getLogger(__name__)


class Design(StrEnum):
    NAIVE = "naive"
    CHECKPOINT = "checkpoint"
    DURABLE = "durable"
    TRANSACTIONAL = "transactional"
    POSITIONAL = "positional"

    @classmethod
    def parse(cls, text: str) -> Design:
        return parse_choice(cls, text, "design")


class RunBusy(AgentError):
    """Another process is running this run right now (it holds the run's lock)."""


class DeterminismError(AgentError):
    """The code asks for a different step than the journal saved at that position."""


@dataclass(frozen=True)
class StepContext:
    """What a step's function gets: the connection to write through and its idempotency key."""

    conn: psycopg.AsyncConnection
    key: str | None


# Registers a new run or finds the existing one, loads its whole journal, and takes the run's
# lock: one round trip, and no write when the run already exists. (Within one statement the
# select cannot see the insert's row, so exactly one of the two branches returns a row.)
# The lock is a session advisory lock: one process runs a run at a time, and Postgres drops the
# lock by itself when that process's connection ends, however it ends.
_OPEN_RUN = """
with new_run as (
    insert into agent_runs (run_id, design, household)
    values (%(run_id)s, %(design)s, %(household)s)
    on conflict (run_id) do nothing
    returning design, household
), run as (
    select design, household from new_run
    union all
    select design, household from agent_runs where run_id = %(run_id)s
)
select run.design, run.household,
       (select coalesce(jsonb_agg(jsonb_build_array(step, name, output)), '[]')
          from agent_steps where run_id = %(run_id)s),
       pg_try_advisory_lock(hashtextextended(%(run_id)s, 0))
from run
"""
_SAVE_STEP = "insert into agent_steps (run_id, step, name, output) values (%s, %s, %s, %s::jsonb)"
# Marks the run completed and lets go of its lock, in one round trip.
_FINISH_RUN = """
with finished as (
    update agent_runs set status = 'completed', result = %(result)s::jsonb, finished_at = now()
    where run_id = %(run_id)s returning run_id
)
select pg_advisory_unlock(hashtextextended(run_id, 0)) from finished
"""
_RELEASE_RUN = "select pg_advisory_unlock(hashtextextended(%s, 0))"
_REGISTER_RUNS = """
insert into agent_runs (run_id, design, household)
select run_id, %(design)s, household from unnest(%(runs)s::text[], %(households)s::text[])
    as run (run_id, household)
on conflict (run_id) do nothing
"""


async def register_runs(
    conn: psycopg.AsyncConnection, design: Design, runs: dict[str, str]
) -> None:
    """Register runs (run id -> household) without running them: `resume` will."""
    params = {"design": design.value, "runs": list(runs), "households": list(runs.values())}
    await conn.execute(_REGISTER_RUNS, params)


class Journal:
    """One run of the hand-rolled baseline: its saved steps (read in one query when it opens),
    replayed from memory, and `step()`, which runs a step not saved yet, saves it (with its
    effect, for `transactional`) and crashes at CRASH_AT where the design's window is. A saved
    step whose name differs from the code's stops the run (DeterminismError)."""

    def __init__(
        self,
        conn: psycopg.AsyncConnection,
        run_id: str,
        design: Design,
        saved: dict[int, tuple[str, Any]],
        crash_at: StepCrashPoint | None,
        pause: Pause | None,
    ) -> None:
        self.conn = conn
        self.run_id = run_id
        self.design = design
        self.saved = saved  # step number -> (name, output as JSON): replayed from memory
        self.crash_at = crash_at
        self.pause = pause
        self.position = 0  # steps asked for so far (the positional design's numbers)

    @classmethod
    async def open(
        cls,
        conn: psycopg.AsyncConnection,
        run_id: str,
        design: Design,
        household: str,
        crash_at: StepCrashPoint | None = None,
        pause: Pause | None = None,
    ) -> Journal:
        params = {"run_id": run_id, "design": design.value, "household": household}
        row = await (await conn.execute(_OPEN_RUN, params)).fetchone()
        if row is None:  # another process created the run during our statement: now it shows
            row = await (await conn.execute(_OPEN_RUN, params)).fetchone()
        assert row is not None
        saved_design, saved_household, steps, locked = row
        if not locked:
            raise RunBusy(f"run {run_id} is being run by another process")
        saved = {} if design is Design.NAIVE else {n: (name, out) for n, name, out in steps}
        journal = cls(conn, run_id, design, saved, crash_at, pause)
        try:
            if saved_design != design.value:
                raise ConfigError(
                    f"run {run_id} was started with design {saved_design}; resume it with that "
                    "design"
                )
            if saved_household != household:
                raise ConfigError(f"run {run_id} belongs to household {saved_household}")
        except ConfigError:
            await journal.release()
            raise
        log.info("run %s: opened, %d of %d steps saved", run_id, len(saved), len(STEPS))
        return journal

    async def step(self, spec: Step[T], fn: Callable[[StepContext], Awaitable[T]]) -> T:
        """Run a step once; a step already in the journal is replayed from memory."""
        name = spec.name
        self.position += 1
        n = self.position if self.design is Design.POSITIONAL else spec.number
        if n in self.saved:  # replay: no I/O at all
            saved_name, output = self.saved[n]
            if saved_name != name:
                raise DeterminismError(
                    f"run {self.run_id}: step {n} is {name!r} in the code but {saved_name!r} in "
                    "the journal; the agent changed since this run started, refusing to replay"
                )
            return spec.output.model_validate(output)

        await self._pause()
        if self.design is Design.NAIVE:
            result = await fn(StepContext(self.conn, None))
            self._crash_if(StepMoment.AFTER_EFFECT, spec.number)
            self._crash_if(StepMoment.AFTER_CHECKPOINT, spec.number)  # nothing saved between
            return result

        if spec.effect is Effect.DATABASE and self.design is Design.TRANSACTIONAL:
            async with self.conn.transaction():
                result = await fn(StepContext(self.conn, None))
                # A crash here aborts the transaction: the effect vanishes with its checkpoint.
                self._crash_if(StepMoment.AFTER_EFFECT, spec.number)
                await self._save(n, name, result)
        else:
            keyed = self.design is not Design.CHECKPOINT
            result = await fn(StepContext(self.conn, f"{self.run_id}:{n}" if keyed else None))
            # THE CRASH WINDOW: the effect is committed and its checkpoint is not. A resumed run
            # runs this step again; only the idempotency key keeps it from doing the effect twice.
            self._crash_if(StepMoment.AFTER_EFFECT, spec.number)
            await self._pause()
            await self._save(n, name, result)
        self._crash_if(StepMoment.AFTER_CHECKPOINT, spec.number)
        return result

    def saved_step(self, spec: Step[Any]) -> bool:
        """Whether this run has saved `spec` (a new release asks, to keep a run that an older one
        took past a step inserted before it on its old path: the journal's patch)."""
        return any(name == spec.name for name, _ in self.saved.values())

    async def _pause(self) -> None:
        if self.pause is not None:
            await asyncio.sleep(random.uniform(*self.pause))

    def _crash_if(self, moment: StepMoment, n: int) -> None:
        point = self.crash_at
        if point is not None and point.moment is moment and point.step == n:
            crash_now(point)

    async def _save(self, n: int, name: str, output: BaseModel) -> None:
        try:
            await self.conn.execute(_SAVE_STEP, (self.run_id, n, name, output.model_dump_json()))
        except psycopg.errors.UniqueViolation:
            raise AgentError(
                f"run {self.run_id}: step {n} was saved by another process running the same run"
            ) from None

    async def finish(self, result: BaseModel) -> None:
        """Record the run's result and let go of its lock."""
        params = {"result": result.model_dump_json(), "run_id": self.run_id}
        await self.conn.execute(_FINISH_RUN, params)
        log.info("run %s: completed", self.run_id)

    async def release(self) -> None:
        """Let go of the run's lock without finishing it (the run stops here, for now)."""
        with contextlib.suppress(psycopg.Error):  # a lost connection took the lock with it
            await self.conn.execute(_RELEASE_RUN, (self.run_id,))
