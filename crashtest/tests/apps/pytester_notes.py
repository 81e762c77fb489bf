"""Run by pytester inside the plugin test: the crash_test fixture on the notes app."""

from __future__ import annotations

import pytest
from notes_app import NotesWorkflow, build, notes_of
from temporal_crashtest import Report
from temporal_crashtest.pytest_plugin import CrashTest


def test_keyed_notes(crash_test: CrashTest) -> None:
    report = crash_test(worker=build, workflow=NotesWorkflow, input=["milk", "eggs"],
                        observe=notes_of, env={"NOTES_KEYED": "1"})  # fmt: skip
    assert [c.crash_at for c in report.cells] == [
        "after-effect:1", "after-effect:2", "after-checkpoint:1",
    ]  # fmt: skip


@pytest.mark.crashtest(jobs=2)
def test_unkeyed_notes(crash_test: CrashTest) -> None:
    crash_test(worker=build, workflow=NotesWorkflow, input=["milk", "eggs"], observe=notes_of)


def test_reference_checked_against_what_is_expected(crash_test: CrashTest) -> None:
    report: Report = crash_test(
        worker=build, workflow=NotesWorkflow, input=["milk", "eggs"], observe=notes_of,
        expect=["milk"], expect_all_match=False,
    )  # fmt: skip
    assert report.cells == [] and report.expect_diff == "the observed value: 1 → 2 entries"
