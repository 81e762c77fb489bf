"""`--html PATH`: the crash test as one self-contained page to look at (no script, no network).

The verdict table (a ✗ row links to its cell); the run without a crash as a timeline; per cell,
the reference's timeline and the crashed run's on one time axis (each activity a bar: the wait
from its scheduling to the attempt that ended it, that attempt, its outcome; the kills, the
workflow tasks that failed or timed out, the end) with what differs; a link to each run in the
Temporal web UI; what was not tested, and why. Every text is escaped: a workflow's strings
cannot add markup to the page."""

from __future__ import annotations

import html
import json
import math
from typing import Any
from urllib.parse import quote

from temporal_crashtest._history.timeline import Timeline
from temporal_crashtest._report.report import WORKFLOW_TIME, Cell, Report
from temporal_crashtest._text import shown


def escape(text: object) -> str:
    """Text for HTML, in an element or an attribute: printable (`shown`: no NUL, escape code or
    bidirectional override reaches the page), then `<>&"'` as entities."""
    return html.escape(shown(text), quote=True)


def web_address(url: str | None) -> str | None:
    """`url` if it is an http(s) address, else None: a link never runs code (`javascript:`)."""
    return url if url and url.startswith(("http://", "https://")) else None


WIDTH, LABELS, ROW = 960, 220, 20  # the timeline's pixels: all, the label column, one bar
COLOURS = {
    "completed": "#2e7d32",
    "failed": "#e65100",
    "timed out": "#e65100",
    "cancelled": "#757575",
    "open": "#9e9e9e",
}
MARKS = {"worker killed": "#c62828", "run ended": "#212121"}  # else: a workflow task's trouble

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #212121; max-width: 1100px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin-top: 28px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.summary { margin: 4px 0 16px; } .ok { color: #2e7d32; } .bad { color: #c62828; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #e0e0e0; }
td { vertical-align: top; }
tr.fail td { background: #ffebee; } td.mark { font-weight: bold; }
code { font: 12px ui-monospace, monospace; }
svg { display: block; margin: 4px 0 12px; }
.axis { font: 11px ui-monospace, monospace; fill: #616161; }
.label { font: 12px ui-monospace, monospace; fill: #212121; }
.legend span { display: inline-block; margin-right: 14px; }
.swatch { display: inline-block; width: 12px; height: 12px; vertical-align: -2px; }
.swatch { margin-right: 4px; }
section.cell { border-top: 1px solid #bdbdbd; margin-top: 12px; }
"""


MAX_BARS = 20_000  # timeline bars a page draws at most (each cell's crashed run's, and more)
REFERENCE = "reference-timeline"  # the id the run without a crash is drawn under, once


class _Budget:
    """How many more bars the page may draw: a report of thousands of cells with long
    timelines (a `merge` of anyone's JSON) is drawn up to MAX_BARS, the rest left out."""

    def __init__(self) -> None:
        self.left = MAX_BARS
        self.omitted = 0

    def take(self, timeline: Timeline) -> bool:
        if len(timeline.bars) > self.left:
            self.omitted += 1
            return False
        self.left -= len(timeline.bars)
        return True


def html_report(report: Report) -> str:
    """The page for `report` (its timelines, when the test kept them). The run without a crash
    is drawn once, and shown again in each cell by reference (`<use>`)."""
    timelines = {k: Timeline.from_json(v) for k, v in report.timelines.items()}
    reference = timelines.get(report.reference_workflow_id)
    scale = max([t.length for t in timelines.values()] or [1.0]) or 1.0
    budget = _Budget()
    if reference is not None and not budget.take(reference):
        reference = None
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>crashtest: {escape(report.workflow)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>crashtest: {escape(report.workflow)}</h1>",
        f'<p class="summary {"ok" if report.ok else "bad"}">{escape(report.summary())}</p>',
        _legend(),
        "<h2>Verdicts</h2>",
        _verdicts(report),
        "<h2>The run without a crash</h2>",
        _run_link(report, report.reference_workflow_id, "reference run"),
        _svg(reference, scale, REFERENCE) if reference else "<p>(no timeline kept)</p>",
        f"<p>Its final state: <code>{escape(_json(report.reference))}</code></p>",
    ]
    cells = sorted(report.cells, key=lambda c: c.matches)  # the ✗ first
    if cells:
        parts.append("<h2>Cells</h2>")
    for cell in cells:
        crashed = timelines.get(cell.workflow_id)
        if crashed is not None and not budget.take(crashed):
            crashed = None
        parts.append(_cell(report, cell, reference, crashed, scale))
    if budget.omitted:
        parts.append(
            f"<p>{budget.omitted} timeline(s) left out: a page draws at most {MAX_BARS} bars "
            "(the JSON report holds them all).</p>"
        )
    parts.append(_untested(report))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _anchor(cell: Cell) -> str:
    return "cell-" + "".join(c if c.isalnum() else "-" for c in cell.crash_at)


def _legend() -> str:
    items = [
        f'<span><span class="swatch" style="background:{c}"></span>{escape(k)}</span>'
        for k, c in COLOURS.items()
    ]
    items += [
        '<span><span class="swatch" style="background:#e3f2fd"></span>waiting for the attempt '
        "that ended it (earlier attempts, retries)</span>",
        f'<span><span class="swatch" style="background:{MARKS["worker killed"]}"></span>'
        "worker killed</span>",
        '<span><span class="swatch" style="background:#ef6c00"></span>workflow task failed or '
        "timed out</span>",
    ]
    return f'<p class="legend">{"".join(items)}</p>'


def _verdicts(report: Report) -> str:
    rows = [
        "<table><tr><th>crash point</th><th>activity</th><th>result</th><th>what differs</th>"
        f"<th>recovery</th>{_workflow_time(report, None)}<th>run</th></tr>"
    ]
    for cell in report.cells:
        mark = "✓" if cell.matches else "✗"
        point = escape(cell.crash_at)
        rows.append(
            f'<tr class="{"pass" if cell.matches else "fail"}">'
            f'<td><a href="#{_anchor(cell)}">{point}</a></td><td>{escape(cell.activity)}</td>'
            f'<td class="mark">{mark}</td><td>{escape(cell.diff or "")}</td>'
            f"<td>{escape(cell.recovery_text())}</td>{_workflow_time(report, cell)}"
            f"<td>{_run_link(report, cell.workflow_id, 'web UI', bare=True)}</td></tr>"
        )
    rows.append("</table>")
    return "\n".join(rows)


def _workflow_time(report: Report, cell: Cell | None) -> str:
    """The column of the workflow time a run covered, when time skipping took one past an hour
    (`Cell.workflow_time_text`): its head for None."""
    if not any(c.workflow_time_text() for c in report.cells):
        return ""
    if cell is None:
        return f"<th>{escape(WORKFLOW_TIME)}</th>"
    return f"<td>{escape(cell.workflow_time_text())}</td>"


def _run_link(report: Report, workflow_id: str, text: str, *, bare: bool = False) -> str:
    if not workflow_id:
        return ""
    ui_url = web_address(report.ui_url)
    if ui_url is None:
        return "" if bare else f"<p>workflow id <code>{escape(workflow_id)}</code></p>"
    href = (
        f"{ui_url.rstrip('/')}/namespaces/{quote(report.namespace, safe='')}/workflows/"
        f"{quote(workflow_id, safe='')}"
    )
    link = f'<a href="{escape(href)}">{escape(text)}</a>'
    return link if bare else f"<p>{link}: <code>{escape(workflow_id)}</code></p>"


def _cell(
    report: Report, cell: Cell, reference: Timeline | None, crashed: Timeline | None, scale: float
) -> str:
    verdict = "✓ ends in the no-crash state" if cell.matches else "✗ differs"
    parts = [
        f'<section class="cell" id="{_anchor(cell)}">',
        f"<h3>{escape(cell.crash_at)} {escape(cell.activity)}: {verdict}</h3>",
    ]
    if cell.diff:
        parts.append(f"<p>What differs: <code>{escape(cell.diff)}</code></p>")
    if cell.group > 1:
        parts.append(f"<p>Cleared in a group: one run killed at {cell.group} points.</p>")
    for label, items in (
        ("In flight at the kill", cell.in_flight),
        ("Fast-forwarded", cell.fast_forward),
        ("Production waits on", cell.waited_on),
    ):
        if items:
            parts.append(f"<p>{label}: {escape('; '.join(items))}</p>")
    parts.append(_run_link(report, cell.workflow_id, "the crashed run"))
    if reference is not None:
        parts += ["<p>Without a crash:</p>", _again(reference)]
    if crashed is not None:
        parts += ["<p>Crashed:</p>", _svg(crashed, scale)]
    parts.append("</section>")
    return "\n".join(parts)


def _step(scale: float) -> float:
    """A round tick interval giving 5 to 10 ticks over `scale` seconds."""
    raw = scale / 8
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    return next(s * power for s in (1, 2, 5, 10) if s * power >= raw)


def _height(timeline: Timeline) -> int:
    return ROW * (len(timeline.bars) + 1) + 16


def _again(timeline: Timeline) -> str:
    """A timeline drawn already (the run without a crash), shown again by reference."""
    height = _height(timeline)
    return (
        f'<svg width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="timeline of {escape(timeline.workflow_id)}">'
        f'<use href="#{REFERENCE}"/></svg>'
    )


def _svg(timeline: Timeline, scale: float, name: str | None = None) -> str:
    """A timeline's drawing (`name`: under that id, for `_again`)."""
    span = WIDTH - LABELS - 10

    def x(t: float) -> float:
        return round(LABELS + span * min(max(t, 0.0), scale) / scale, 1)

    height = _height(timeline)
    out = [
        f'<svg width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="timeline of {escape(timeline.workflow_id)}">',
        f'<g id="{name}">' if name else "<g>",
    ]
    step = _step(scale)
    tick = 0.0
    while tick <= scale + 1e-9:
        out.append(
            f'<line x1="{x(tick)}" y1="0" x2="{x(tick)}" y2="{height - 14}" stroke="#eeeeee"/>'
            f'<text class="axis" x="{x(tick)}" y="{height - 2}" text-anchor="middle">'
            f"{tick:g} s</text>"
        )
        tick += step
    for row, bar in enumerate(timeline.bars):
        y = ROW * row + 4
        attempt = f" (attempt {bar.attempt})" if bar.attempt > 1 else ""
        out.append(f'<text class="label" x="4" y="{y + 12}">{escape(bar.label + attempt)}</text>')
        began = bar.started if bar.started is not None else bar.closed
        if began is not None and began > bar.scheduled:
            wide = max(x(began) - x(bar.scheduled), 1)
            out.append(
                f'<rect x="{x(bar.scheduled)}" y="{y}" width="{wide}" height="14" fill="#e3f2fd">'
                f"<title>waiting: scheduled at {bar.scheduled:g} s</title></rect>"
            )
        start = began if began is not None else bar.scheduled
        end = bar.closed if bar.closed is not None else timeline.length
        colour = COLOURS.get(bar.outcome, "#9e9e9e")
        out.append(
            f'<rect x="{x(start)}" y="{y}" width="{max(x(end) - x(start), 2)}" height="14" '
            f'fill="{colour}"><title>{escape(bar.label)}: attempt {bar.attempt}, '
            f"{escape(bar.outcome)} at {end:g} s</title></rect>"
        )
    for mark in timeline.marks:
        colour = MARKS.get(mark.what, "#ef6c00")
        dash = "" if mark.what in MARKS else ' stroke-dasharray="4 3"'
        out.append(
            f'<line x1="{x(mark.at)}" y1="0" x2="{x(mark.at)}" y2="{height - 14}" '
            f'stroke="{colour}" stroke-width="2"{dash}><title>{escape(mark.what)} at '
            f"{mark.at:g} s</title></line>"
        )
    out.append("</g></svg>")
    return "".join(out)


def _untested(report: Report) -> str:
    if not report.untested and not report.warnings:
        return ""
    parts = ["<h2>Not tested</h2>"]
    if report.untested:
        parts.append("<table><tr><th>boundary</th><th>why</th></tr>")
        parts += [
            f"<tr><td>{escape(u.boundary)}</td><td>{escape(u.why)}</td></tr>"
            for u in report.untested
        ]
        parts.append("</table>")
    parts += [f"<p>Note: {escape(w)}</p>" for w in report.warnings]
    return "\n".join(parts)
