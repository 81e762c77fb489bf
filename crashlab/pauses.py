"""The chaos lab's window widening: pauses around every activity of a Temporal worker, so random
kills land between an effect and the server hearing of it more often than in a fast run."""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

from temporalio import activity, client, worker

log = logging.getLogger(__name__)


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
