"""A crash test's results: one cell per boundary, as a table (terminal or Markdown) and JSON.

Every text here may hold the user's data (labels, keys and values of the observed state, the
workflow's name): each method that renders text passes it through `_text` first."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporal_crashtest._errors import CrashPointError
from temporal_crashtest._points.points import CrashPoint, Moment, Untested, killed_after
from temporal_crashtest._text import (
    SKIPPED_SPAN,
    json_bytes,
    markdown_cell,
    shown,
    span_text,
)

WORKFLOW_TIME = "workflow time (time skipping)"  # the column, when a run skipped past an hour
NOTES_LISTED = 3  # untested boundaries with one reason listed one by one; more: one line


# What followed a kill inside an activity, after one of its effects (`Cell.retry`), in words.
MADE_AGAIN, RAN_AGAIN, NOT_RETRIED = "made it again", "ran again", "not retried"
AFTER_THE_EFFECT = {
    MADE_AGAIN: "the retried attempt made it again",
    RAN_AGAIN: "the retried attempt did not make it again, yet the run ended otherwise",
    NOT_RETRIED: "no attempt followed (its retry policy left none), so nothing was made twice: "
    "the activity failed in the workflow",
}
RECORD_IS_NO_KEY = (
    'a record written after an effect ("done") does not stop its repeat: send a key the '
    "receiver checks, or write the record in the effect's own transaction."
)
LAST_ATTEMPT = (
    "an activity whose worker dies on its last attempt fails in the workflow, whatever it made: "
    "let it retry (its effects keyed), or handle its failure in the workflow."
)


@dataclass(kw_only=True)
class Cell:
    """One crash point's result: the run killed there and finished by a fresh worker, its
    observed final state against the reference's, and what its recovery waited on."""

    workflow_id: str  # the cell's run, to find it in the web UI
    crash_at: str  # MOMENT:N (a `_points.Moment`), maybe *K; "none" for the run without a crash
    activity: str  # the activity at the boundary (and the next one, for after-checkpoint)
    matches: bool  # the observed final state equals the reference's
    observed: Any
    diff: str | None  # what differs from the reference, in a line
    recovery_s: float | None  # from the SIGKILL to the run's end
    seconds: float  # the whole cell
    waited_on: list[str] = field(default_factory=list)  # the timeouts the recovery waited on
    error: str | None = None  # the cell could not be run as designed
    in_flight: list[str] = field(default_factory=list)  # other boundaries running at the kill
    crashes: int = 0  # how many workers were killed (a repeat may end before its last)
    fast_forward: list[str] = field(default_factory=list)  # what was done instead of waiting
    group: int = 1  # points crashed in the run that gave this verdict (1: a run of its own)
    not_reached: str | None = None  # its run never reached the point, and why: no verdict
    retry: str = ""  # killed inside an activity: what its next attempt did (MADE_AGAIN, ...)
    workflow_s: float = 0.0  # the workflow time its run covered (time skipping: past `seconds`)

    @property
    def moment(self) -> Moment | None:
        """The moment of `crash_at` (None: the run without a crash, or not a crash point)."""
        try:
            return CrashPoint.parse(self.crash_at).moment
        except CrashPointError:
            return None

    def skipped(self) -> timedelta | None:
        """The workflow time its run covered, if time skipping took it past SKIPPED_SPAN."""
        span = timedelta(seconds=self.workflow_s)
        return span if span > SKIPPED_SPAN else None

    def workflow_time_text(self) -> str:
        """ "7 days in 1.1 s" for a run time skipping took past an hour of workflow time; ""
        below it (the wall's time says it)."""
        span = self.skipped()
        return f"{span_text(span)} in {self.seconds:.1f} s" if span else ""

    def recovery_text(self) -> str:
        if self.group > 1:
            return f"cleared in a group: one run killed at {self.group} points"
        if self.recovery_s is None:
            return ""
        waits = f": {', '.join(self.waited_on)}" if self.waited_on else ""
        return f"{self.recovery_s:.1f} s{waits}"


@dataclass(kw_only=True)
class Report:
    """A whole crash test: the reference (the run that never crashed), one Cell per crash point,
    what was not tested and why, and warnings; as a table (terminal or Markdown) or JSON. `ok`
    when every cell matches the reference (and the reference matches --expect).

    Returns (its methods): `table()` the cells as a terminal or Markdown table, `notes()` what
    was not tested, `summary()` one line, `failure_text()` what a failing test says,
    `to_json()`/`write_json()` the report as the CLI's `--json` writes it.
    """

    workflow: str
    activities: list[str]  # every boundary's label, in order
    reference: Any
    cells: list[Cell]
    seconds: float
    untested: list[Untested] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    expect_diff: str | None = None  # the reference differs from --expect, and how
    real_timeouts: bool = False  # False: the recoveries were fast-forwarded
    logs: str | None = None  # where the workers' logs were kept (None: removed, all matched)
    reference_end: str = "completed"  # how the run without a crash ended; every cell must too
    runs: int = 0  # the runs the cells took (a group's run clears several points)
    groups: int = 0  # the groups the points began in (0: a run per point, --exact)
    deploy_to: str | None = None  # a deploy test: the version that took over after each kill
    deployed_reference: Any = None  # ... and its run without a crash's state
    pinned: str | None = None  # ... and the one version a crashed run had to end as (--expect)
    # ... and its replay pass: each cut of the old history replayed on the new code (`_replay`)
    replay: list[dict[str, Any]] = field(default_factory=list)
    shard: str | None = None  # "K/N": this report holds shard K's crash points (`--shard`)
    plan: list[str] = field(default_factory=list)  # a shard's: every shard's points together
    reference_workflow_id: str = ""  # the run without a crash, to find it in the web UI
    namespace: str = "default"
    ui_url: str | None = None  # the Temporal web UI's address (None: not known)
    # each run's timeline (`_timeline`), by workflow id, when kept (`CrashTestOptions.timelines`)
    timelines: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.expect_diff is None and all(c.matches for c in self.cells)

    @property
    def failed(self) -> list[Cell]:
        return [c for c in self.cells if not c.matches]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        cells = [Cell(**c) for c in data["cells"]]
        untested = [Untested(**u) for u in data.get("untested", [])]
        return cls(**{**data, "cells": cells, "untested": untested})

    def json_bytes(self) -> bytes:
        """The report as strict JSON (what `--json` writes)."""
        return json_bytes(self.to_json()) + b"\n"

    def write_json(self, path: Path) -> None:
        path.write_bytes(self.json_bytes())

    def table(self, *, markdown: bool = False) -> str:
        waits = (
            "recovery: timeouts waited on"
            if self.real_timeouts
            else "recovery (fast-forwarded): the timeouts production waits on"
        )
        head = ["crash point", "activity", "result", "what differs", waits]
        cell = markdown_cell if markdown else shown
        rows = [
            [
                cell(c.crash_at),
                cell(c.activity),
                "✓" if c.matches else "✗",
                cell(c.diff or ""),
                cell(c.recovery_text()),
            ]
            for c in self.cells
        ]
        if any(c.in_flight for c in self.cells):
            head.insert(2, "in flight at the kill")
            for row, c in zip(rows, self.cells, strict=True):
                row.insert(2, cell(", ".join(c.in_flight)))
        if any(c.workflow_time_text() for c in self.cells):
            head.insert(-1, WORKFLOW_TIME)
            for row, c in zip(rows, self.cells, strict=True):
                row.insert(-1, cell(c.workflow_time_text()))
        if markdown:
            lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(r) + " |" for r in rows]
            return "\n".join(lines)
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
        return "\n".join(
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]
            for r in [head, *rows]
        ).rstrip()

    def notes(self) -> str:
        """What was not tested, and what the user should know, under the table."""
        by_why: dict[str, list[str]] = {}
        for u in self.untested:
            by_why.setdefault(u.why, []).append(u.boundary)
        lines = []
        for why, boundaries in by_why.items():
            if len(boundaries) <= NOTES_LISTED:
                lines += [f"not tested: {shown(b)}: {shown(why)}" for b in boundaries]
            else:  # one line for many (the JSON and JUnit still list each)
                some = ", ".join(shown(b) for b in boundaries[:NOTES_LISTED])
                lines.append(f"not tested: {len(boundaries)} boundaries ({some}, …): {shown(why)}")
        lines += [f"note: {shown(w)}" for w in self.warnings]
        inside = [c for c in self.failed if c.moment is not None and c.moment.kills_at_an_effect]
        for c in inside:
            then = AFTER_THE_EFFECT.get(c.retry, AFTER_THE_EFFECT[MADE_AGAIN])
            said = (
                f"killed after {killed_after(c.activity)}, before the activity's next line ran: "
                f"{then} ({c.diff})"
            )
            lines.append(f"note: {shown(c.crash_at)}: {shown(said)}")
        retries = {c.retry or MADE_AGAIN for c in inside}
        if retries - {NOT_RETRIED}:
            lines.append(f"note: {RECORD_IS_NO_KEY}")
        if NOT_RETRIED in retries:
            lines.append(f"note: {LAST_ATTEMPT}")
        return "\n".join(lines)

    def summary(self) -> str:
        workflow = shown(self.workflow)
        if self.expect_diff is not None:
            return (
                f"{workflow}: the run without a crash already differs from what you "
                f"expect: {shown(self.expect_diff)}"
            )
        ends = (
            ""
            if self.reference_end == "completed"
            else f" (each {self.reference_end}, as the run without a crash)"
        )
        ends = shown(ends)
        state = "no-crash state"
        if self.deploy_to is not None:
            workflow += f" deployed to {shown(self.deploy_to)}"
            state = (
                f"no-crash state of the {self.pinned} version"
                if self.pinned
                else "no-crash state of either version"
            )
        if self.shard is not None:
            workflow += f", shard {self.shard} ({len(self.cells)} of {len(self.plan)} points)"
        if self.ok:
            return (
                f"{workflow}: all {len(self.cells)} crash points end in the "
                f"{state}{ends} ({self.seconds:.1f} s)"
            )
        names = ", ".join(f"{shown(c.crash_at)} ({shown(c.activity)})" for c in self.failed)
        return (
            f"{workflow}: {len(self.failed)} of {len(self.cells)} crash points do not end "
            f"in the {state}: {names} ({self.seconds:.1f} s)"
        )

    def failure_text(self) -> str:
        """What a test failure says: which boundaries differ and how, then the whole table."""
        lines = [self.summary(), ""]
        for c in self.failed:
            lines.append(f"  {shown(c.crash_at)} ({shown(c.activity)}): {shown(c.diff)}")
        return "\n".join([*lines, "", self.table(), self.notes()]).rstrip()
