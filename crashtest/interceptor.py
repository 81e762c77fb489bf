"""A worker interceptor that SIGKILLs its own worker process at a crash point.

Install it on the client (`Client.connect(..., interceptors=[CrashInterceptor(point)])`): a client
interceptor that is also a worker interceptor reaches every worker built on that client, so the
code under test is not changed.

How it knows where it is: its workflow half stamps every activity the workflow schedules with a
header carrying the activity's position in scheduling order, its type and which run of that type
it is (and the same of the activity scheduled before it). Workflow code is deterministic, so the
stamps are the same on every replay. Its activity half reads the stamp and kills the process:

- `after-effect:N`: activity N returned (on any attempt); the worker has not yet reported the
  completion to the server, so the server will run activity N again.
- `after-checkpoint:N`: the first attempt of the activity scheduled after N is starting. For a
  workflow that runs its activities one after another, the server has recorded N's completion
  (that is what scheduled the next one). Activities running in parallel may still be in flight.

Local activities carry no stamp and are never crash points.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from dataclasses import dataclass
from typing import Any

from temporalio import activity, client, worker
from temporalio.api.common.v1 import Payload

from crashtest.points import CrashPoint, Moment, crash_now

HEADER = "crashtest-boundary"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stamp:
    position: int
    activity: str
    occurrence: int

    def label(self) -> str:
        suffix = f"#{self.occurrence}" if self.occurrence > 1 else ""
        return f"activity {self.position} ({self.activity}{suffix})"


def _encode(here: Stamp, previous: Stamp | None) -> Payload:
    data = {"here": here.__dict__, "previous": previous.__dict__ if previous else None}
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(data).encode())


def _decode(payload: Payload | None) -> tuple[Stamp, Stamp | None] | None:
    if payload is None:
        return None
    data = json.loads(payload.data)
    previous = data["previous"]
    return Stamp(**data["here"]), Stamp(**previous) if previous else None


class _StampingOutbound(worker.WorkflowOutboundInterceptor):
    """Counts the activities a workflow run schedules and stamps each one."""

    def __init__(self, next: worker.WorkflowOutboundInterceptor) -> None:
        super().__init__(next)
        self._scheduled = 0
        self._runs: dict[str, int] = {}
        self._previous: Stamp | None = None

    def start_activity(self, input: worker.StartActivityInput) -> Any:
        self._scheduled += 1
        self._runs[input.activity] = self._runs.get(input.activity, 0) + 1
        here = Stamp(self._scheduled, input.activity, self._runs[input.activity])
        input.headers = {**input.headers, HEADER: _encode(here, self._previous)}
        self._previous = here
        return super().start_activity(input)


class _StampingInbound(worker.WorkflowInboundInterceptor):
    def init(self, outbound: worker.WorkflowOutboundInterceptor) -> None:
        super().init(_StampingOutbound(outbound))


class _CrashingActivity(worker.ActivityInboundInterceptor):
    def __init__(
        self, next: worker.ActivityInboundInterceptor, point: CrashPoint, workflow_id: str | None
    ) -> None:
        super().__init__(next)
        self.point = point
        self.workflow_id = workflow_id

    async def execute_activity(self, input: worker.ExecuteActivityInput) -> Any:
        stamps = _decode(input.headers.get(HEADER))
        info = activity.info()
        if stamps is None or (self.workflow_id and info.workflow_id != self.workflow_id):
            return await super().execute_activity(input)
        here, previous = stamps
        point = self.point
        if (
            point.moment is Moment.AFTER_CHECKPOINT
            and info.attempt == 1
            and previous is not None
            and point.matches(previous.position, previous.activity, previous.occurrence)
        ):
            crash_now(point, f"{previous.label()} is recorded; {here.label()} is starting")
        result = await super().execute_activity(input)
        if point.moment is Moment.AFTER_EFFECT and point.matches(
            here.position, here.activity, here.occurrence
        ):
            crash_now(point, f"{here.label()} returned; its completion is not yet reported")
        return result


class CrashInterceptor(client.Interceptor, worker.Interceptor):
    """SIGKILL this worker's process at `point`, in any workflow on the worker's task queue or
    only in the workflow `workflow_id`."""

    def __init__(self, point: CrashPoint, workflow_id: str | None = None) -> None:
        self.point = point
        self.workflow_id = workflow_id

    def intercept_activity(
        self, next: worker.ActivityInboundInterceptor
    ) -> worker.ActivityInboundInterceptor:
        return _CrashingActivity(next, self.point, self.workflow_id)

    def workflow_interceptor_class(
        self, input: worker.WorkflowInterceptorClassInput
    ) -> type[worker.WorkflowInboundInterceptor]:
        return _StampingInbound


class PauseInterceptor(client.Interceptor, worker.Interceptor):
    """Pause a random `low_s`..`high_s` before every activity and again after it returns (before
    its completion is reported), and log each activity's start and end.

    The pauses widen the windows that random kills land in: between an effect and the server
    hearing of it, where only an idempotency key prevents a repeat. The log says what a killed
    worker held: the activities it started and had not finished (`activity started` lines
    without their `activity ended` line)."""

    def __init__(self, low_s: float, high_s: float, rng: random.Random | None = None) -> None:
        self.low_s = low_s
        self.high_s = high_s
        self.rng = rng or random.Random()

    def intercept_activity(
        self, next: worker.ActivityInboundInterceptor
    ) -> worker.ActivityInboundInterceptor:
        return _PausingActivity(next, self)

    async def pause(self) -> None:
        await asyncio.sleep(self.rng.uniform(self.low_s, self.high_s))


class _PausingActivity(worker.ActivityInboundInterceptor):
    def __init__(self, next: worker.ActivityInboundInterceptor, pauses: PauseInterceptor) -> None:
        super().__init__(next)
        self.pauses = pauses

    async def execute_activity(self, input: worker.ExecuteActivityInput) -> Any:
        info = activity.info()
        if info.is_local:
            return await super().execute_activity(input)
        where = f"{info.workflow_id} {info.activity_id} {info.activity_type} attempt {info.attempt}"
        log.info("activity started: %s", where)
        outcome = "failed"
        try:
            await self.pauses.pause()
            result = await super().execute_activity(input)
            await self.pauses.pause()
            outcome = "returned"
            return result
        finally:
            log.info("activity ended (%s): %s", outcome, where)
