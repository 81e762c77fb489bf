"""GroceryAgentWorkflow: the grocery agent's steps, one activity each, each activity id the
step's own number (`agent.steps`: a number names a step and is never reused) — so that every
idempotency key, `workflow_id:activity_id`, stays on its step when a version inserts, removes or
reorders steps, and on a reset (docs/deploys.md).

The release before (`workflows.grocery_v1`) let the SDK number the activities in the order they
run, which gave the six steps the same numbers: its runs in flight replay on this code, and
their keys do not move. The price check, new in this version, has a number of its own (7) and
runs behind `workflow.patched(PRICE_CHECK)`: a run the release before had taken past it keeps
its path; one reset on this version takes the check, and its order still has key 4."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypedDict

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
        PriceQuote,
        SummaryInput,
    )
    from agent.releases import PRICE_CHECK
    from agent.retries import NOT_RETRIED, STEP_RETRIES
    from agent.steps import (
        CHECK_PANTRY,
        CHECK_PRICES,
        CHOOSE,
        PLACE_ORDER,
        PLAN,
        SEND_CONFIRMATION,
        SUMMARISE,
        Step,
    )


# The steps in the order a run of this version takes them (a crash test's boundaries).
RUN_ORDER = (PLAN, CHECK_PANTRY, CHOOSE, CHECK_PRICES, PLACE_ORDER, SEND_CONFIRMATION, SUMMARISE)
ACTIVITY_NAMES = tuple(step.name for step in RUN_ORDER)


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
    """The grocery agent as a Temporal workflow: plan, check the pantry, choose, check the prices,
    place the order, send the confirmation, summarise, each an activity with ACTIVITY_OPTIONS
    and its step's number as its id. Its id is the
    business id `grocery-{household}-{week}` (the starter refuses a second run of a week), which
    every step's idempotency key is made from; the workflow itself only orders the steps."""

    @workflow.run
    async def run(self, request: GroceryRequest) -> GroceryResult:
        def options(step: Step[Any]) -> dict[str, Any]:
            return {**ACTIVITY_OPTIONS, "activity_id": str(step.number)}

        plan = await workflow.execute_activity_method(
            GroceryActivities.plan, request, **options(PLAN)
        )
        pantry = await workflow.execute_activity_method(
            GroceryActivities.check_pantry,
            PantryInput(household=request.household, plan=plan),
            **options(CHECK_PANTRY),
        )
        choice = await workflow.execute_activity_method(
            GroceryActivities.choose, pantry, **options(CHOOSE)
        )
        quote: PriceQuote | None = None
        if workflow.patched(PRICE_CHECK):
            quote = await workflow.execute_activity_method(
                GroceryActivities.check_prices, choice, **options(CHECK_PRICES)
            )
        order = await workflow.execute_activity_method(
            GroceryActivities.place_order, choice, **options(PLACE_ORDER)
        )
        email = await workflow.execute_activity_method(
            GroceryActivities.send_confirmation,
            ConfirmationInput(household=request.household, order=order),
            **options(SEND_CONFIRMATION),
        )
        summary = await workflow.execute_activity_method(
            GroceryActivities.summarise,
            SummaryInput(order=order, email=email),
            **options(SUMMARISE),
        )
        return GroceryResult(summary=summary, order=order, email=email, quote=quote)
