"""GroceryAgentWorkflow as the release before the price check shipped: six steps, activity ids
that count them (the SDK's default: 1 to 6). Kept for the deploy crash test, which starts runs
on it and lets `workflows.grocery` take them over; in production, a release's code lives in the
history of the repository, not beside the next one."""

from __future__ import annotations

from pydantic import ValidationError
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.grocery import GroceryActivities
    from agent.data import (
        ConfirmationInput,
        GroceryRequest,
        GroceryResult,
        PantryInput,
        SummaryInput,
    )
    from workflows.grocery import ACTIVITY_OPTIONS


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
