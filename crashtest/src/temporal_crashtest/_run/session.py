"""What every run of one crash test shares (`Session`: the server, how its workers start, the
user's drive, how recoveries are timed), a run once started (`Started`), and how a run ended
(`ending`), in words that compare equal across runs."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from temporalio import exceptions as temporal_errors
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from temporal_crashtest._calls import call, result_of, seen
from temporal_crashtest._errors import CellFailed
from temporal_crashtest._history.tree import RunHistory
from temporal_crashtest._plan.target import Drive, Target, Version
from temporal_crashtest._run.recovery.polling import tree_histories
from temporal_crashtest._run.workers import Workers
from temporal_crashtest._worker.task_failures import with_likely_cause

DEFAULT_DEADLINE_S = 120.0


@dataclass(frozen=True, kw_only=True)
class Started:
    """A run once started: its handle, its result as it comes, and the user's drive beside it."""

    workflow_id: str
    handle: WorkflowHandle[Any, Any]
    result: asyncio.Future[Any]
    drive: asyncio.Future[Any] | None = None

    def ending(self) -> str:
        """How the run ended (`ending`), once its result came."""
        error = self.result.exception()
        if error is not None and not isinstance(error, WorkflowFailureError):
            raise CellFailed(f"waiting for the result: {type(error).__name__}: {error}")
        return ending(error, self.workflow_id)

    def again(self, handle: WorkflowHandle[Any, Any]) -> Started:
        """The same run, waited for through another handle (a reset's new run)."""
        return Started(
            workflow_id=self.workflow_id,
            handle=handle,
            result=seen(asyncio.ensure_future(result_of(handle))),
            drive=self.drive,
        )

    async def give_up(self) -> None:
        """Stop the drive and the wait; terminate a run that has not ended."""
        if self.drive is not None and not self.drive.done():
            self.drive.cancel()
        if not self.result.done():
            self.result.cancel()
            with contextlib.suppress(Exception):  # closed already, or the server is gone
                await self.handle.terminate(reason="crashtest: the cell gave up")


@dataclass(frozen=True, kw_only=True)
class Session:
    """What every run of one crash test shares: its target among them (`workers.target`)."""

    client: Client
    workers: Workers
    drive: Drive | None = None
    deadline_s: float = DEFAULT_DEADLINE_S
    real_timeouts: bool = False  # False: fast-forward every recovery
    resume_after_s: float = 0.0  # after a kill (or before a reset), before the run resumes
    starter: Client | None = None  # the client runs start on, if not `client` (one skipping time)
    horizon: timedelta | None = None  # with `starter`: how far time skipping moves a run's clock

    @property
    def target(self) -> Target:
        return self.workers.target

    def alone(self, version: Version) -> Session:
        """The same, for a test of one version alone (`Target.alone`)."""
        workers = replace(self.workers, target=self.target.alone(version))
        return replace(self, workers=workers)

    async def start(
        self,
        workflow_id: str,
        queue: str,
        task_timeout: timedelta | None = None,
        *,
        skip: bool = True,
    ) -> Started:
        """Start the run (`skip`: with time skipping, where the session has it)."""
        starter = self.starter if skip and self.starter is not None else self.client
        handle = await starter.start_workflow(
            self.target.workflow,
            self.target.input,
            id=workflow_id,
            task_queue=queue,
            task_timeout=task_timeout,
        )
        drive = None
        if self.drive is not None:
            drive = seen(asyncio.ensure_future(call(self.drive, handle)))
        result = seen(asyncio.ensure_future(result_of(handle)))
        return Started(workflow_id=workflow_id, handle=handle, result=result, drive=drive)

    async def histories(self, handle: WorkflowHandle[Any, Any]) -> list[RunHistory]:
        """The histories of every run of the workflow's tree (children, continue-as-new)."""
        first = handle.first_execution_run_id or handle.result_run_id or handle.run_id or ""
        stamped = not self.target.old.on_the_wire
        return await tree_histories(self.client, handle.id, first, stamped)


def ending(error: WorkflowFailureError | None, workflow_id: str) -> str:
    """How a run ended, in words that compare equal across runs: `completed`, `failed: TYPE:
    MESSAGE` (the innermost cause; the run's own workflow id masked), `cancelled`,
    `terminated`, `timed out`."""
    if error is None:
        return "completed"
    cause: BaseException = error.cause
    if isinstance(cause, temporal_errors.CancelledError):
        return "cancelled"
    if isinstance(cause, temporal_errors.TerminatedError):
        return "terminated"
    if isinstance(cause, temporal_errors.TimeoutError):  # the workflow's own timeout
        return "timed out"
    while getattr(cause, "cause", None) is not None:
        cause = cause.cause  # type: ignore[attr-defined]
    kind = type(cause).__name__  # a TimeoutError's `type` is an enum, not a name
    if isinstance(cause, temporal_errors.ApplicationError) and cause.type:
        kind = cause.type
    message = with_likely_cause(str(getattr(cause, "message", None) or cause))
    return f"failed: {kind}: {message.replace(workflow_id, '<workflow id>')}"
