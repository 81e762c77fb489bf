"""GroceryAgentWorkflow as somebody might 'improve' it: it skips the pantry check.

Replaying a history recorded by the real workflow with this one must fail: the history says the
second activity was check_pantry, this code schedules choose.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.grocery import GroceryActivities
    from agent.data import (
        ConfirmationInput,
        GroceryRequest,
        GroceryResult,
        PantryReport,
        SummaryInput,
    )
    from workflows.grocery import ACTIVITY_OPTIONS


@workflow.defn(name="GroceryAgentWorkflow")
class ReorderedGroceryAgentWorkflow:
    @workflow.run
    async def run(self, request: GroceryRequest) -> GroceryResult:
        plan = await workflow.execute_activity_method(
            GroceryActivities.plan, request, **ACTIVITY_OPTIONS
        )
        pantry = PantryReport(have=[], missing=plan.staples)
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
