"""One keyed note per activity (the notes app's, with NOTES_KEYED=1), each under another
combination of timeouts and retries (`TIMEOUTS`): a killed attempt ends as production's timeout
ends it — retried (the run goes on) or not (the activity fails: the run fails, or the workflow
catches it and goes on). The fast-forwarded verdict at each must equal the one that waits the
timeouts out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from notes_app import notes_of, write_note  # keyed with NOTES_KEYED=1

__all__ = ["TIMEOUTS", "TimeoutsWorkflow", "build", "notes_of"]

S = timedelta(seconds=1)
# Each combination: the activity's options, and whether the workflow catches its failure.
TIMEOUTS: dict[str, dict[str, Any]] = {
    "schedule-to-close only": {"schedule_to_close_timeout": 6 * S},
    "start-to-close only": {"start_to_close_timeout": 3 * S},
    "both, room for a retry": {
        "start_to_close_timeout": 2 * S,
        "schedule_to_close_timeout": 60 * S,
    },
    "both, no room for a retry": {
        "start_to_close_timeout": 5 * S,
        "schedule_to_close_timeout": 6 * S,
    },
    "heartbeat": {"schedule_to_close_timeout": 60 * S, "heartbeat_timeout": 2 * S},
    "one attempt": {
        "start_to_close_timeout": 3 * S,
        "retry_policy": RetryPolicy(maximum_attempts=1),
    },
    "schedule-to-close only, caught": {"schedule_to_close_timeout": 6 * S, "caught": True},
}


@workflow.defn
class TimeoutsWorkflow:
    @workflow.run
    async def run(self, combinations: list[str]) -> int:
        for combination in combinations:
            options = dict(TIMEOUTS[combination])
            caught = options.pop("caught", False)
            try:
                await workflow.execute_activity(write_note, combination, **options)
            except ActivityError:
                if not caught:
                    raise
        return len(combinations)


def build(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[TimeoutsWorkflow],
        activities=[write_note],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
