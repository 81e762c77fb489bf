"""Each engine's runs in a chaos run: how they are started, how their completion and their
progress are read (Temporal from the server, the journal and DBOS from Postgres)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

import psycopg
from dbos import DBOSClient, EnqueueOptions
from temporal_crashtest import Processes
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError

from agent.data import EXAMPLE_WEEK, GroceryRequest
from crashlab.fleet import Fleet
from dbos_agent.__main__ import SCHEMA as DBOS_SCHEMA
from dbos_agent.agent import QUEUE_NAME, WORKFLOW_NAME, DBOSRequest, KeyDesign
from infra.db import connect_postgres
from infra.errors import ConfigError, DatabaseUnavailable
from journal.engine import Design, register_runs
from workflows.grocery import GroceryAgentWorkflow

RETRY_S = 0.5  # how soon to ask again a server that is restarting
HISTORIES_AT_ONCE = 10


class ChaosRuns(Protocol):
    """An engine's runs in a chaos run: started, watched, stopped; run by `fleet`."""

    fleet: Fleet
    failed: dict[str, str]  # run id -> why it failed for good (a Temporal workflow's failure)

    async def start(self, run_ids: list[str]) -> None: ...

    async def completed(self) -> set[str]: ...

    async def progress_times(self, run_ids: list[str]) -> dict[str, list[float]]: ...

    def stop(self) -> None: ...


def households(run_ids: list[str]) -> dict[str, str]:
    """Each run orders for a household of its own, so its email goes to its own address."""
    return {run_id: f"h{run_id.rsplit('-', 1)[1]}" for run_id in run_ids}


class TemporalRuns:
    """N workflows on `fleet`'s task queue; a result waiter per run that outlives server
    restarts."""

    def __init__(self, client: Client, fleet: Fleet, queue: str) -> None:
        self.client = client
        self.fleet = fleet
        self.queue = queue
        self.done: set[str] = set()
        self.failed: dict[str, str] = {}
        self._waiters: list[asyncio.Task[None]] = []

    async def start(self, run_ids: list[str]) -> None:
        people = households(run_ids)
        await asyncio.gather(*(self._start_one(run_id, people[run_id]) for run_id in run_ids))
        self._waiters = [asyncio.create_task(self._wait(run_id)) for run_id in run_ids]

    async def _start_one(self, run_id: str, household: str) -> None:
        while True:
            try:
                await self.client.start_workflow(
                    GroceryAgentWorkflow.run,
                    GroceryRequest(household=household, week=EXAMPLE_WEEK),
                    id=run_id,
                    task_queue=self.queue,
                )
                return
            except WorkflowAlreadyStartedError:  # an earlier try got through; its answer did not
                return
            except RPCError:
                await asyncio.sleep(RETRY_S)

    async def _wait(self, run_id: str) -> None:
        handle = self.client.get_workflow_handle(run_id)
        while True:
            try:
                await handle.result()
                self.done.add(run_id)
                return
            except WorkflowFailureError as err:
                self.failed[run_id] = str(err.cause or err)
                return
            except RPCError:  # the server is restarting
                await asyncio.sleep(RETRY_S)

    async def completed(self) -> set[str]:
        return self.done

    async def progress_times(self, run_ids: list[str]) -> dict[str, list[float]]:
        """When each run completed an activity (server time, seconds since the epoch)."""
        limit = asyncio.Semaphore(HISTORIES_AT_ONCE)

        async def completions(run_id: str) -> list[float]:
            async with limit:
                history = await self.client.get_workflow_handle(run_id).fetch_history()
            return [
                e.event_time.ToNanoseconds() / 1e9
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
            ]

        found = await asyncio.gather(*(completions(run_id) for run_id in run_ids))
        return dict(zip(run_ids, found, strict=True))

    def stop(self) -> None:
        for waiter in self._waiters:
            waiter.cancel()


async def _runs_where(db_url: str, query: Any, run_ids: list[str], before: set[str]) -> set[str]:
    """The run ids `query` (one parameter: the run ids) answers; `before` while Postgres is
    restarting."""
    with contextlib.suppress(psycopg.Error, DatabaseUnavailable, OSError):
        async with await connect_postgres(db_url) as conn:
            rows = await conn.execute(query, (run_ids,))
            return {row[0] for row in await rows.fetchall()}
    return before


async def _times(db_url: str, query: Any, run_ids: list[str]) -> dict[str, list[float]]:
    """(run id, seconds since the epoch) rows of `query`, by run."""
    async with await connect_postgres(db_url) as conn:
        rows = await conn.execute(query, (run_ids,))
        times: dict[str, list[float]] = {}
        for run_id, at in await rows.fetchall():
            if at is not None:
                times.setdefault(run_id, []).append(float(at))
    return times


class JournalRuns:
    """N runs registered in the journal, run by `fleet`'s `resume` processes."""

    def __init__(self, db_url: str, fleet: Fleet, design: Design) -> None:
        self.db_url = db_url
        self.fleet = fleet
        self.design = design
        self.run_ids: list[str] = []
        self.done: set[str] = set()
        self.failed: dict[str, str] = {}  # a run that fails is retried, never failed

    async def start(self, run_ids: list[str]) -> None:
        self.run_ids = run_ids
        async with await connect_postgres(self.db_url) as conn:
            await register_runs(conn, self.design, households(run_ids))

    async def completed(self) -> set[str]:
        query = "select run_id from agent_runs where run_id = any(%s) and status = 'completed'"
        self.done = await _runs_where(self.db_url, query, self.run_ids, self.done)
        return self.done

    async def progress_times(self, run_ids: list[str]) -> dict[str, list[float]]:
        """When each run saved a step (database time, seconds since the epoch)."""
        query = (
            "select run_id, extract(epoch from created_at)::float8 from agent_steps"
            " where run_id = any(%s)"
        )
        return await _times(self.db_url, query, run_ids)

    def stop(self) -> None:
        """Nothing of the runs lives in this process."""


class DBOSRuns:
    """N runs enqueued on DBOS's `grocery` queue, run by `fleet`'s `python -m dbos_agent serve`
    processes: each slot has an executor id of its own, kept across restarts, so a restarted
    process recovers the runs its predecessor held (as DBOS expects of a supervised fleet)."""

    def __init__(self, db_url: str, fleet: Fleet, design: str, procs: Processes) -> None:
        self.db_url = db_url
        self.fleet = fleet
        self.design = KeyDesign.parse(design)
        self.procs = procs
        self.run_ids: list[str] = []
        self.done: set[str] = set()
        self.failed: dict[str, str] = {}  # a run that fails is retried, never failed

    async def start(self, run_ids: list[str]) -> None:
        self.run_ids = run_ids
        code = await self.procs.run("dbos-setup", ["-m", "dbos_agent", "setup"], 120)
        if code != 0:
            raise ConfigError(f"python -m dbos_agent setup: {self.procs.last_line('dbos-setup')}")
        client = DBOSClient(system_database_url=self.db_url, dbos_system_schema=DBOS_SCHEMA)
        try:
            for run_id, household in households(run_ids).items():
                options = EnqueueOptions(
                    workflow_name=WORKFLOW_NAME,
                    queue_name=QUEUE_NAME,
                    workflow_id=run_id,
                )
                request = DBOSRequest(household=household, design=self.design)
                await client.enqueue_async(options, request)
        finally:
            client.destroy()

    async def completed(self) -> set[str]:
        query = (
            f"select workflow_uuid from {DBOS_SCHEMA}.workflow_status"
            " where workflow_uuid = any(%s) and status = 'SUCCESS'"
        )
        self.done = await _runs_where(self.db_url, query, self.run_ids, self.done)
        return self.done

    async def progress_times(self, run_ids: list[str]) -> dict[str, list[float]]:
        """When each run's steps were recorded (database time, seconds since the epoch)."""
        query = (
            f"select workflow_uuid, completed_at_epoch_ms / 1000.0 from "
            f"{DBOS_SCHEMA}.operation_outputs where workflow_uuid = any(%s)"
        )
        return await _times(self.db_url, query, run_ids)

    def stop(self) -> None:
        """Nothing of the runs lives in this process."""


def quiet_runtime() -> Runtime:
    """The lab restarts the server on purpose: its own client's retries meanwhile are expected,
    not news (the SDK logs each one as a warning)."""
    quiet = TelemetryFilter(core_level="ERROR", other_level="ERROR")
    return Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=quiet)))
