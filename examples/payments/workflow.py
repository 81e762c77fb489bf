"""PaymentsWorkflow: look up the invoices, charge each one, send one receipt."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TypedDict

from temporalio import workflow
from temporalio.common import RetryPolicy


@dataclass
class PaymentRequest:
    customer: str
    invoices: list[str]  # invoice numbers


@dataclass
class Invoice:
    number: str
    amount_cents: int


@dataclass
class Charge:
    charge_id: int
    invoice: str
    amount_cents: int


@dataclass
class ChargeInput:
    customer: str
    invoice: Invoice


@dataclass
class ReceiptInput:
    customer: str
    charges: list[Charge]


class ActivityOptions(TypedDict):
    start_to_close_timeout: timedelta
    heartbeat_timeout: timedelta
    retry_policy: RetryPolicy


# A killed worker is noticed after 2 s (the activities are quick, so they need not heartbeat).
OPTIONS = ActivityOptions(
    start_to_close_timeout=timedelta(seconds=30),
    heartbeat_timeout=timedelta(seconds=2),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200)),
)


@workflow.defn
class PaymentsWorkflow:
    @workflow.run
    async def run(self, request: PaymentRequest) -> int:
        invoices: list[Invoice] = await workflow.execute_activity(
            "look_up_invoices", request, result_type=list[Invoice], **OPTIONS
        )
        charges = []
        for invoice in invoices:
            charges.append(
                await workflow.execute_activity(
                    "charge", ChargeInput(request.customer, invoice), result_type=Charge, **OPTIONS
                )
            )
        return await workflow.execute_activity(
            "send_receipt", ReceiptInput(request.customer, charges), result_type=int, **OPTIONS
        )
