"""The effect check's judgement, in-process: an order found under the run's reference counts
only if it is the one this step places, and a look-alike shows as what it is."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.data import OrderLine
from agent.grocer import GrocerOrder, OrderNotOurs
from agent.steps import ours

MILK = [OrderLine(item="milk", quantity=2)]


def found(item: str, quantity: int = 2) -> GrocerOrder:
    return GrocerOrder(id=7, reference="r:4", created_at=datetime.now(UTC),
                       lines=[OrderLine(item=item, quantity=quantity)])  # fmt: skip


def test_the_same_lines_are_ours() -> None:
    assert ours([found("eggs"), found("milk")], MILK, "r:4").id == 7


@pytest.mark.parametrize(
    ("item", "quantity", "shown"),
    [("caviar", 24, "24 x caviar"), ("m\u0456lk", 2, "2 x m\\u0456lk"), ("milk", 3, "3 x milk")],
)
def test_another_order_is_not_ours_and_says_so_plainly(
    item: str, quantity: int, shown: str
) -> None:
    """A Cyrillic i (U+0456) in 'milk' is printed as its escape: the two sides of the line do
    not read the same."""
    with pytest.raises(OrderNotOurs) as refused:
        ours([found(item, quantity)], MILK, "r:4")
    assert f"found {shown}; this run orders 2 x milk" in str(refused.value)
