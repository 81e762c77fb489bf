"""The grocery agent's next version as Temporal's versioning guide ships a new step — the price
check behind its own `workflow.patched` — with the SDK's activity ids, which count the steps.
Every run in flight is safe; a reset is not: reset to before the order on this version, a run
of the release before takes the patched path, the price check takes activity id 4, and the
order, the email and the summary run again under new keys (4 model calls, 2 orders, 2 emails).
The deploy crash test must fail it; `workflows.grocery` does it right."""

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
    from agent.releases import PRICE_CHECK
    from workflows.grocery import ACTIVITY_OPTIONS


@workflow.defn(name="GroceryAgentWorkflow", failure_exception_types=[ValidationError])
class GroceryAgentWorkflow:
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
        quote = None
        if workflow.patched(PRICE_CHECK):
            quote = await workflow.execute_activity_method(
                GroceryActivities.check_prices, choice, **ACTIVITY_OPTIONS
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
        return GroceryResult(summary=summary, order=order, email=email, quote=quote)
