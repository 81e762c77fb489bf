"""Workflows that wait, as most real ones do: a sign-up whose reminder goes out a week later
(`WeekReminder`), an order that waits three days for a person's approval and is cancelled if
none comes (`ApprovalWithin3Days`; crashtest's drive `approve` approves it), a trial whose end is
noted a week after its reminder, in the next run of its chain (`TrialNotes`), and a daily job
that never ends (`DailyJob`), which time skipping follows only to its horizon.

crashtest starts every run with Temporal's time skipping where the server allows it: a week's
sleep or three days' wait take the run no real time, and the timeout's branch runs without a
drive."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from psycopg_pool import AsyncConnectionPool

    from examples.shapes.build import OPTIONS, shape_worker
    from examples.shapes.ledger import record, workflow_key

A_WEEK = timedelta(days=7)
THREE_DAYS = timedelta(days=3)
RESEND_AFTER_S = 0.5


class WaitingActivities:
    def __init__(self, pool: AsyncConnectionPool, *, keyed: bool) -> None:
        self.pool, self.keyed = pool, keyed

    async def _record(self, what: str, run: str = "") -> None:
        """Keyed `{workflow_id}:{activity_id}`, with the run's place in its chain (`run`) after
        the first: activity ids start again at 1 in each run of a continue-as-new chain."""
        key = (
            workflow_key()
            if not run
            else f"{activity.info().workflow_id}:{run}:{activity.info().activity_id}"
        )
        await record(self.pool, what, key if self.keyed else None)

    @activity.defn
    async def create_account(self, user: str) -> None:
        await self._record(f"account of {user}")

    @activity.defn
    async def send_reminder(self, user: str) -> None:
        await self._record(f"reminder to {user}")

    @activity.defn
    async def send_welcome(self, user: str) -> None:
        await self._record(f"welcome to {user}")

    @activity.defn
    async def end_trial(self, user: str) -> None:
        await self._record(f"trial of {user} ended", run="trial-end")

    @activity.defn
    async def place_order(self, order: str) -> None:
        await self._record(f"order {order}")

    @activity.defn
    async def cancel_order(self, order: str) -> None:
        await self._record(f"cancelled {order}")

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.create_account,
            self.send_welcome,
            self.send_reminder,
            self.end_trial,
            self.place_order,
            self.cancel_order,
        ]


@workflow.defn
class WeekReminder:
    @workflow.run
    async def run(self, user: str) -> None:
        await workflow.execute_activity_method(WaitingActivities.create_account, user, **OPTIONS)
        await workflow.sleep(A_WEEK)
        await workflow.execute_activity_method(WaitingActivities.send_reminder, user, **OPTIONS)


@workflow.defn
class TrialNotes:
    """A two-week trial: the account, a reminder a week later, then — continued as new, as a
    long-lived run keeps its history short — the trial's end a week after that. Its second wait
    is in the chain's second run, after a timer the first run waited on."""

    @workflow.run
    async def run(self, trial: dict[str, Any]) -> None:
        user = str(trial["user"])
        if not trial.get("reminded"):
            await workflow.execute_activity_method(
                WaitingActivities.create_account, user, **OPTIONS
            )
            await workflow.sleep(A_WEEK)
            await workflow.execute_activity_method(WaitingActivities.send_reminder, user, **OPTIONS)
            workflow.continue_as_new({"user": user, "reminded": True})
        await workflow.sleep(A_WEEK)
        await workflow.execute_activity_method(WaitingActivities.end_trial, user, **OPTIONS)


@workflow.defn
class ReminderAfter:
    """The reminder after `{"days": N}` (none: at once), for the bench's row of what a long
    sleep costs a crash test beside none."""

    @workflow.run
    async def run(self, ask: dict[str, Any]) -> None:
        user = str(ask["user"])
        await workflow.execute_activity_method(WaitingActivities.create_account, user, **OPTIONS)
        if ask["days"]:
            await workflow.sleep(timedelta(days=float(ask["days"])))
        await workflow.execute_activity_method(WaitingActivities.send_reminder, user, **OPTIONS)


@workflow.defn
class ApprovalWithin3Days:
    def __init__(self) -> None:
        self.approved = False

    @workflow.signal
    def approve(self) -> None:
        self.approved = True

    @workflow.run
    async def run(self, order: str) -> str:
        try:
            await workflow.wait_condition(lambda: self.approved, timeout=THREE_DAYS)
        except TimeoutError:
            await workflow.execute_activity_method(WaitingActivities.cancel_order, order, **OPTIONS)
            return "cancelled: no approval within 3 days"
        await workflow.execute_activity_method(WaitingActivities.place_order, order, **OPTIONS)
        return "placed"


@workflow.defn
class DailyJob:
    """A job that runs every day, for ever: it never ends, so no run without a crash can be
    compared with; time skipping stops at its horizon, and crashtest says so."""

    @workflow.run
    async def run(self, user: str) -> None:
        await workflow.execute_activity_method(WaitingActivities.send_reminder, user, **OPTIONS)
        while True:
            await workflow.sleep(timedelta(days=1))


async def approve(handle: WorkflowHandle[Any, Any]) -> None:
    """crashtest's DRIVE: the approver's click, sent until the server takes it (a signal is
    refused only while the server cannot be reached; a repeat sets the same flag)."""
    while True:
        try:
            await handle.signal(ApprovalWithin3Days.approve)
            return
        except RPCError:
            await asyncio.sleep(RESEND_AFTER_S)


async def _worker(client: Client, task_queue: str, keyed: bool) -> Worker:
    return await shape_worker(
        client,
        task_queue,
        [WeekReminder, TrialNotes, ReminderAfter, ApprovalWithin3Days, DailyJob],
        lambda pool: WaitingActivities(pool, keyed=keyed).all(),
    )


async def keyed_worker(client: Client, task_queue: str) -> Worker:
    return await _worker(client, task_queue, keyed=True)


async def unkeyed_worker(client: Client, task_queue: str) -> Worker:
    return await _worker(client, task_queue, keyed=False)
