"""The interceptor's stamps and crash sites, and the report's differences, in-process."""

from __future__ import annotations

from dataclasses import replace

import pytest
from temporal_crashtest._errors import CrashPointError
from temporal_crashtest._history.tree import Tree
from temporal_crashtest._plan.compare import differences, short
from temporal_crashtest._plan.reference import Reference
from temporal_crashtest._points.points import Moment, Untested
from temporal_crashtest._points.sites import (
    ROOT_SCOPE,
    CrashSite,
    Stamp,
    decode_scope,
    decode_stamp,
    encode,
    next_run,
)
from temporal_crashtest._report.html import html_report
from temporal_crashtest._report.report import WORKFLOW_TIME, Cell, Report
from temporalio.api.common.v1 import Payload


def test_a_stamp_travels_in_a_header_and_back() -> None:
    stamp = Stamp(
        root="order-1",
        scope=ROOT_SCOPE,
        position=4,
        activity="place_order",
        local=False,
        occurrence=1,
    )
    assert decode_stamp(encode(stamp.__dict__)) == stamp
    assert decode_stamp(None) is None
    assert decode_stamp(Payload(data=b"not json")) is None
    assert decode_stamp(encode({"root": "order-1"})) is None  # fields missing: not ours


def test_a_stamp_names_its_boundary() -> None:
    assert (
        Stamp(root="w", scope=ROOT_SCOPE, position=4, activity="place_order", local=False).label()
        == "activity 4 (place_order)"
    )
    child = Stamp(root="w", scope="ChargeChild@1", position=1, activity="charge", local=True)
    assert child.label() == "ChargeChild@1 activity 1 (charge local)"


def test_a_scope_header_and_the_next_run_of_a_chain() -> None:
    scope = decode_scope(encode({"root": "w", "scope": "@1"}))
    assert scope is not None and (scope.root, scope.scope) == ("w", "@1")
    assert decode_scope(encode({"root": "w"})) is None
    assert next_run("@1") == "@2"
    assert next_run("ChargeChild@3") == "ChargeChild@4"


def test_a_crash_site_finds_its_stamp_by_position_or_type() -> None:
    by_position = CrashSite.parse("after-effect:4")
    assert (by_position.moment, by_position.position) == (Moment.AFTER_EFFECT, 4)
    place = Stamp(root="w", scope=ROOT_SCOPE, position=4, activity="place_order", local=False)
    second_charge = Stamp(
        root="w", scope=ROOT_SCOPE, position=3, activity="charge", local=False, occurrence=2
    )
    assert by_position.names(place) and not by_position.names(second_charge)
    by_type = CrashSite.parse("after-checkpoint:charge#2")
    assert (by_type.activity, by_type.occurrence) == ("charge", 2)
    assert by_type.names(second_charge) and not by_type.names(place)
    assert str(by_type) == "after-checkpoint:charge#2"
    assert CrashSite.parse(by_type.to_text()) == by_type  # how the runner hands it to a worker
    elsewhere = Stamp(
        root="w", scope="ChargeChild@1", position=4, activity="place_order", local=False
    )
    assert not by_position.names(elsewhere)  # another run of the tree


@pytest.mark.parametrize("text", ["reset:4", "after-effect:4*2", "{not json", "somewhere:1"])
def test_a_worker_crashes_itself_only_once_after_an_effect_or_a_checkpoint(text: str) -> None:
    with pytest.raises(CrashPointError):
        CrashSite.parse(text)


def test_differences_say_what_changed_in_one_line() -> None:
    order = {"items": ["milk"]}
    reference = {"orders": [order], "emails": ["#1"], "summary": "ok"}
    assert differences(reference, reference) is None
    assert differences(reference, {**reference, "orders": [order, order]}) == (
        "orders: 1 → 2 entries"
    )
    assert differences(reference, {**reference, "summary": "oops"}) == 'summary: "ok" → "oops"'
    assert differences(reference, {"orders": [{"items": ["eggs"]}], "emails": ["#1"]}) == (
        'orders[0].items[0]: "milk" → "eggs"; summary: missing'
    )
    assert differences([1], {"a": 1}) == 'the observed value: [1] → {"a": 1}'


def test_many_differences_are_counted_not_listed() -> None:
    reference = {f"k{i}": i for i in range(6)}
    observed = {f"k{i}": i + 1 for i in range(6)}
    assert differences(reference, observed) == "k0: 0 → 1; k1: 1 → 2; k2: 2 → 3 (+3 more)"
    assert short("x" * 100, 10) == '"xxxxxx...'


def test_a_failure_names_its_likely_cause() -> None:
    """What a worker without a framework's plugin or data converter fails with points at the
    flag that fixes it."""
    from temporal_crashtest._worker.task_failures import with_likely_cause

    sandbox = "Cannot access os.environ.get from inside a workflow. If this is code from a module"
    assert with_likely_cause(sandbox).endswith(
        "(a --plugin missing? an agent framework's plugin configures the sandbox)"
    )
    assert with_likely_cause("Failed decoding arguments").endswith(
        "(a --plugin or --data-converter missing?)"
    )
    assert with_likely_cause("card declined") == "card declined"


def test_a_deploy_cell_may_end_as_either_version() -> None:
    """A deploy test's crashed run matches the old version's run without a crash or the new
    one's; neither: both differences are said."""
    old = Reference({"effects": ["charge"]}, Tree(runs=[]))
    new = Reference({"effects": ["charge", "notice"]}, Tree(runs=[]))
    deploy = replace(old, deployed=new)
    assert deploy.differs("completed", {"effects": ["charge"]}) is None
    assert deploy.differs("completed", {"effects": ["charge", "notice"]}) is None
    assert old.differs("completed", {"effects": ["charge", "notice"]}) is not None
    both = deploy.differs("completed", {"effects": ["charge", "charge"]})
    assert both is not None and both.startswith("old version: ") and "; new version: " in both
    assert deploy.differs("failed", {"effects": ["charge"]}) == (
        "old version: the run failed; without a crash it completed; "
        "new version: the run failed; without a crash it completed"
    )


def test_many_boundaries_untested_for_one_reason_are_one_line() -> None:
    """`--points` on a long workflow: one line for the others, not one per boundary (the JSON
    still lists each)."""
    asked = "not among the crash points asked for (--points)"
    untested = [Untested(f"charge#{i}", asked) for i in range(2, 30)]
    untested.append(Untested("summarise", "after it the run only ends"))
    report = Report(workflow="W", activities=[], reference=None, cells=[], seconds=1.0,
                    untested=untested)  # fmt: skip
    assert report.notes().splitlines() == [
        f"not tested: 28 boundaries (charge#2, charge#3, charge#4, …): {asked}",
        "not tested: summarise: after it the run only ends",
    ]


def test_a_run_time_skipping_took_past_an_hour_says_its_workflow_time() -> None:
    """A column of workflow time in the table (terminal, Markdown) and the HTML report, only
    when a cell's run covered more than an hour of it (time skipping): "7 days in 2.5 s"."""
    cell = Cell(workflow_id="w", crash_at="wait:2", activity="send", matches=True, observed=None,
                diff=None, recovery_s=1.0, seconds=2.5, workflow_s=7 * 86400 + 0.3)  # fmt: skip
    short_run = replace(cell, crash_at="after-effect:1", workflow_s=0.4)
    report = Report(workflow="W", activities=[], reference=None, cells=[cell, short_run],
                    seconds=3.0)  # fmt: skip
    assert cell.workflow_time_text() == "7 days in 2.5 s" and short_run.workflow_time_text() == ""
    head, _, row, other = report.table(markdown=True).splitlines()
    assert f"| {WORKFLOW_TIME} |" in head
    assert "| 7 days in 2.5 s |" in row and "|  |" in other
    assert "7 days in 2.5 s" in report.table()
    assert f"<th>{WORKFLOW_TIME}</th>" in html_report(report)
    alone = replace(report, cells=[short_run])
    assert WORKFLOW_TIME not in alone.table() and WORKFLOW_TIME not in html_report(alone)
