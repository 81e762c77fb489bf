"""A crash test's report as CI systems read it: JUnit XML (one testcase per crash point) and
GitHub Actions' `::error` workflow commands (one per point that differs)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from temporal_crashtest._report.report import Cell, Report
from temporal_crashtest._text import shown

SUITE = "crashtest"


def _name(cell: Cell) -> str:
    return shown(f"{cell.crash_at} ({cell.activity})" if cell.activity else cell.crash_at)


def _details(cell: Cell) -> str:
    """A failure's text: a line a fact, each `shown` (XML 1.0 cannot hold a control
    character)."""
    lines = [f"what differs: {cell.diff}" if cell.diff else "", f"workflow id: {cell.workflow_id}"]
    if cell.recovery_text():
        lines.append(f"recovery: {cell.recovery_text()}")
    if cell.in_flight:
        lines.append(f"in flight at the kill: {', '.join(cell.in_flight)}")
    lines += [f"fast-forward: {line}" for line in cell.fast_forward]
    return "\n".join(shown(line) for line in lines if line)


def junit_xml(report: Report) -> str:
    """One testsuite for the workflow: a testcase per crash point (a failure carries what
    differs and the recovery; a cell that could not be run, an error), a skipped testcase per
    boundary not tested (with why), and, when the run without a crash differs from `expect`,
    a failing testcase for it. A shard's suite is named for its shard, and only shard 1 lists
    the untested boundaries (every shard has the same: merged JUnit counts them once)."""
    shard = f" shard {report.shard}" if report.shard else ""
    suite = ET.Element("testsuite", name=shown(f"{SUITE} {report.workflow}{shard}"))
    classname = shown(f"{SUITE}.{report.workflow}")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if report.expect_diff is not None:
        case = ET.SubElement(suite, "testcase", classname=classname, name="reference (no crash)")
        message = shown(f"differs from --expect: {report.expect_diff}")
        ET.SubElement(case, "failure", message=message)
        counts["tests"] += 1
        counts["failures"] += 1
    for cell in report.cells:
        case = ET.SubElement(
            suite, "testcase", classname=classname, name=_name(cell), time=f"{cell.seconds:.2f}"
        )
        counts["tests"] += 1
        if cell.error is not None:
            ET.SubElement(case, "error", message=shown(cell.error)).text = _details(cell)
            counts["errors"] += 1
        elif not cell.matches:
            message = shown(cell.diff or "does not end in the no-crash state")
            ET.SubElement(case, "failure", message=message).text = _details(cell)
            counts["failures"] += 1
    listed = report.shard is None or report.shard.startswith("1/")
    for untested in report.untested if listed else []:
        case = ET.SubElement(suite, "testcase", classname=classname, name=shown(untested.boundary))
        ET.SubElement(case, "skipped", message=shown(untested.why))
        counts["tests"] += 1
        counts["skipped"] += 1
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{report.seconds:.1f}")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _escape(text: str) -> str:
    """A workflow command's data: GitHub reads %, CR and LF as escapes."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape(text).replace(":", "%3A").replace(",", "%2C")


def github_errors(report: Report) -> list[str]:
    """`::error title=…::…` for each crash point that differs (and a reference that differs
    from `expect`), as GitHub Actions shows on the run's summary."""
    lines = []
    if report.expect_diff is not None:
        title = _escape_property(shown(f"crashtest {report.workflow}: reference"))
        lines.append(f"::error title={title}::{_escape(report.summary())}")
    for cell in report.failed:
        title = _escape_property(shown(f"crashtest {report.workflow}: {_name(cell)}"))
        message = cell.diff or "does not end in the no-crash state"
        if cell.recovery_text():
            message += f" (recovery {cell.recovery_text()})"
        lines.append(f"::error title={title}::{_escape(shown(message))}")
    return lines
