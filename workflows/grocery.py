"""GroceryAgentWorkflow: the six steps of the grocery agent, one activity each."""

from __future__ import annotations

from datetime import timedelta
from typing import TypedDict

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.grocery import GroceryActivities
    from agent.data import (
        ConfirmationInput,
        GroceryRequest,
        GroceryResult,
        PantryInput,
        SummaryInput,
    )
    from agent.retries import NOT_RETRIED, STEP_RETRIES


# Chosen for a fast, safe recovery from a killed worker (see docs/operations.md, "Timeouts"):
# - heartbeat_timeout 2 s: activities heartbeat every 0.5 s, so a dead worker is noticed in <= 2 s;
# - start_to_close_timeout 5 min: the bound on one attempt of a slow model call;
# - retries start after 200 ms and back off to 5 s; a model that keeps answering malformed JSON,
#   a request the model's provider refuses, a choice the guardrails refuse and an order the
#   grocer refuses (a 4xx other than 429) are not retried.
class ActivityOptions(TypedDict):
    start_to_close_timeout: timedelta
    heartbeat_timeout: timedelta
    retry_policy: RetryPolicy


# Retries are bounded, on the schedule every engine's steps share (agent.retries).
ACTIVITY_OPTIONS = ActivityOptions(
    start_to_close_timeout=timedelta(minutes=5),
    heartbeat_timeout=timedelta(seconds=2),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=STEP_RETRIES.first_wait_s),
        backoff_coefficient=STEP_RETRIES.backoff,
        maximum_interval=timedelta(seconds=STEP_RETRIES.longest_wait_s),
        maximum_attempts=STEP_RETRIES.attempts,
        non_retryable_error_types=[error.__name__ for error in NOT_RETRIED],
    ),
)


# A ValidationError fails the run instead of retrying its workflow task: an input off the
# patterns (a household with a line break, started past the starter) never becomes valid.
@workflow.defn(failure_exception_types=[ValidationError])
class GroceryAgentWorkflow:
    """The grocery agent as a Temporal workflow: plan, check the pantry, choose, place the order,
    send the confirmation, summarise, each an activity with ACTIVITY_OPTIONS. Its id is the
    business id `grocery-{household}-{week}` (the starter refuses a second run of a week), which
    every step's idempotency key is made from; the workflow itself only orders the steps."""

    @workflow.run
    async def run(self, request: GroceryRequest) -> GroceryResult:
        plan = await workflow.execute_activity_method(
            GroceryActivities.plan, request, **ACTIVITY_OPTIONS
        )
        pantry = await workflow.execute_activity_method(
            GroceryActivities.check_pantry,
            PantryInput(household=request.household, plan=plan),
            **ACTIVITY_OPTIONS,
        )
        choice = await workflow.execute_activity_method(
            GroceryActivities.choose, pantry, **ACTIVITY_OPTIONS
        )
        order = await workflow.execute_activity_method(
            GroceryActivities.place_order, choice, **ACTIVITY_OPTIONS
        )
        email = await workflow.execute_activity_method(
            GroceryActivities.send_confirmation,
            ConfirmationInput(household=request.household, order=order),
            **ACTIVITY_OPTIONS,
        )
        summary = await workflow.execute_activity_method(
            GroceryActivities.summarise, SummaryInput(order=order, email=email), **ACTIVITY_OPTIONS
        )
        return GroceryResult(summary=summary, order=order, email=email)
