"""How the calls of one activity in one run are told apart in the report where their first input
strings do not: by what is new in each call's input, never by what every call repeats, nor by
what a run makes up. (Where the first strings do tell them apart, they are the label: the
payments example's `charge#2 (acme inv-2)`, tests/test_crashtest.py.)"""

from __future__ import annotations

from temporal_crashtest._history.tree import call_hints

PROMPT = "You are a grocery planner. Think step by step, then call the tools you need."


def test_a_conversation_is_named_by_its_newest_turn() -> None:
    first = [PROMPT, "order milk for the week"]
    second = [*first, "I will check the pantry", "pantry: 1 milk"]
    third = [*second, "I will order 2 milk", "ordered 2 x milk"]
    assert call_hints([first, second, third], ["wf-1"]) == [
        "",  # nothing new: the first call
        "I will check the pantry…",
        "I will order 2 milk ord…",
    ]


def test_text_comes_before_identifiers() -> None:
    order = ["place_order", "milk", "order-1"]
    message = ["send_message", "sam", "2 x milk ordered", "message-1"]
    assert call_hints([order, message], ["wf-1"]) == ["", "2 x milk ordered"]
    assert call_hints([order, message[:2]], ["wf-1"]) == ["", "send_message sam"]


def test_what_a_run_makes_up_is_never_in_a_label() -> None:
    run = "crashtest-5e1f2a3b-1-reference"
    one = ["system", "<marker_81f3>", "turn at 2026-12-03T04:00:00Z"]
    two = [*one, f"run {run}", "call 0f8fad5b-d9cb-469f-a165-70867728950e", "the answer"]
    # The first call's own strings (a marker, a time) are not used; nor the run's id, a uuid.
    assert call_hints([one, two], [run]) == ["", "the answer"]
