"""Guardrails before spending: what the model chose to buy is checked before any order.

Only items the pantry reported missing and the price list below holds, at most MAX_QUANTITY of
each, and a total within the household's budget, at those prices. A violation is not worth
retrying (the model's answer is recorded, so asking the same step again returns the same
choice): the run ends, with no order and no email, and says why in one line. An item is shown
as ASCII (`'m\\u0456lk'`), so that a look-alike letter does not read as the item it imitates.
"""

from __future__ import annotations

from collections import Counter

from agent.data import Choice, PantryReport
from infra.errors import AgentError

# What the agent expects to pay, in cents (the grocer's shelf prices may differ a little).
PRICES_CENTS = {
    "milk": 129, "eggs": 349, "bread": 249, "coffee": 899, "apples": 299,
    "rice": 219, "oats": 189, "tomatoes": 259, "cheese": 549,
}  # fmt: skip
MAX_QUANTITY = 6
BUDGET_CENTS = 45_00


class GuardrailViolation(AgentError):
    """The model chose something the household would not pay for."""


def money(cents: int) -> str:
    return f"{cents / 100:.2f}"


def check_choice(pantry: PantryReport, choice: Choice) -> None:
    missing = set(pantry.missing)
    quantities: Counter[str] = Counter()
    for line in choice.lines:
        if line.item not in missing:
            raise GuardrailViolation(
                f"the model chose {line.item!a}, which the pantry did not report missing "
                f"(missing: {', '.join(sorted(missing))})"
            )
        if line.item not in PRICES_CENTS:
            raise GuardrailViolation(
                f"the model chose {line.item!a}, which is not on the price list "
                f"({', '.join(sorted(PRICES_CENTS))})"
            )
        quantities[line.item] += line.quantity  # the same item on two lines counts once
    for item, quantity in quantities.items():
        if quantity > MAX_QUANTITY:
            raise GuardrailViolation(
                f"the model chose {quantity} x {item!a}; at most {MAX_QUANTITY} of an item"
            )
    check_budget(sum(PRICES_CENTS[item] * quantity for item, quantity in quantities.items()))


def check_budget(total_cents: int) -> None:
    """GuardrailViolation if an order of `total_cents` is over the household's budget."""
    if total_cents > BUDGET_CENTS:
        raise GuardrailViolation(
            f"the order would cost {money(total_cents)}, over the household's budget of "
            f"{money(BUDGET_CENTS)}"
        )
