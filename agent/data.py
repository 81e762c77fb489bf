"""The agent's data types: every step's input and output, as pydantic models."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Plan(BaseModel):
    """Step 1 (model): what the household needs to have in stock this week."""

    staples: list[str] = Field(min_length=1)
    note: str


class PantryReport(BaseModel):
    """Step 2: what is already in the pantry and what is missing."""

    have: list[str]
    missing: list[str]


class OrderLine(BaseModel):
    item: str = Field(min_length=1)
    quantity: int = Field(ge=1, le=24)


class Choice(BaseModel):
    """Step 3 (model): what to buy."""

    lines: list[OrderLine] = Field(min_length=1)


class OrderPlaced(BaseModel):
    """Step 4 (side effect): the order as it was placed."""

    order_id: int
    lines: list[OrderLine]


class EmailSent(BaseModel):
    """Step 5 (side effect): the confirmation email as the outbox holds it."""

    email_id: int
    recipient: str
    subject: str
    body: str


class Summary(BaseModel):
    """Step 6 (model): the run's summary for the household."""

    text: str = Field(min_length=1)


# Inputs and the result of the Temporal workflow and its activities (one pydantic model each).


class GroceryRequest(BaseModel):
    household: str = Field(min_length=1)
    week: str = Field(min_length=1, description="ISO week, e.g. 2026-W49")


# The week of every run whose outcome is compared with another's (the crash lab, the benches,
# the tests): a fixed business id, so that runs of the same household are the same run.
EXAMPLE_WEEK = "2026-W49"


class PantryInput(BaseModel):
    household: str
    plan: Plan


class ConfirmationInput(BaseModel):
    household: str
    order: OrderPlaced


class SummaryInput(BaseModel):
    order: OrderPlaced
    email: EmailSent


class GroceryResult(BaseModel):
    summary: Summary
    order: OrderPlaced
    email: EmailSent
