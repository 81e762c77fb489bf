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


# A household's name and a week, as the workflow id `grocery-{household}-{week}` and the
# confirmation's recipient `{household}@example.com` are made from them: no spaces, no line
# breaks, nothing a mail header or a URL would read as syntax.
HOUSEHOLD_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
WEEK_PATTERN = r"^\d{4}-W(0[1-9]|[1-4]\d|5[0-3])$"


class GroceryRequest(BaseModel):
    """The workflow's input, checked wherever it is decoded: a run started past the starter
    (`temporal workflow start`) with a household or week off these patterns fails at once."""

    household: str = Field(pattern=HOUSEHOLD_PATTERN)
    week: str = Field(pattern=WEEK_PATTERN, description="ISO week, e.g. 2026-W49")


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


class PriceQuote(BaseModel):
    """The next version's step (read-only): what the order will cost, line by line, checked
    before any money is spent."""

    total_cents: int = Field(ge=0)
    lines: list[str]  # "2 x milk at 1.29"


class GroceryResult(BaseModel):
    summary: Summary
    order: OrderPlaced
    email: EmailSent
    quote: PriceQuote | None = None  # None: a run of the version before the price check
