"""The report formats, one table: the files (`FORMATS`: each one's flag, what it holds, and how
a report is written in it) and the lines printed (`PRINTED`: the terminal's table, GitHub's
`::error` lines). `run` and `merge` both take their flags from it and write and print through
it, so a new format is one row here (and its writer's module).

Standard library only, besides the writers.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from temporal_crashtest._files import OutputError, check_output, write_output
from temporal_crashtest._option import Option, Part
from temporal_crashtest._report.ci import github_errors, junit_xml
from temporal_crashtest._report.html import html_report
from temporal_crashtest._report.report import Report
from temporal_crashtest._text import defused


@dataclass(frozen=True)
class Format:
    flag: str  # `--json`: where the report is written in this format
    holds: str  # what the file holds, for --help
    write: Callable[[Report], bytes]

    @property
    def name(self) -> str:
        """Its option's name (the pytest fixture's keyword): `junit_xml`."""
        return self.flag[2:].replace("-", "_")

    @property
    def option(self) -> Option:
        """Its option: where to write the report in this format."""
        return Option(
            self.name, f"where to write {self.holds}", Part.REPORT, type=Path, metavar="PATH"
        )


FORMATS = (
    Format("--json", "the report as JSON (what `merge` reads)", lambda r: r.json_bytes()),
    Format(
        "--markdown",
        "the table as Markdown",
        lambda r: (r.table(markdown=True) + "\n").encode(),
    ),
    Format(
        "--html",
        "one self-contained HTML page: the verdicts, each run's timeline, links to the web UI, "
        "what was not tested",
        lambda r: html_report(r).encode(),
    ),
    Format(
        "--junit-xml",
        "JUnit XML: a testcase per crash point (the untested ones skipped)",
        lambda r: junit_xml(r).encode(),
    ),
)


@dataclass(frozen=True)
class Printed:
    """Lines a report is printed as, on standard output, when `now()` says so."""

    holds: str
    now: Callable[[], bool]
    lines: Callable[[Report], list[str]]


def _terminal(report: Report) -> list[str]:
    texts = (report.table() if report.cells else "", report.notes(), report.summary())
    # every field is `shown` already; no line starts a command
    return [defused(line) for text in texts for line in filter(None, text.splitlines())]


PRINTED = (
    Printed("the table of verdicts, the notes and the summary", lambda: True, _terminal),
    Printed(
        "GitHub's ::error lines, one per failing crash point (with GITHUB_ACTIONS=true)",
        lambda: os.environ.get("GITHUB_ACTIONS") == "true",
        github_errors,
    ),
)


def print_reports(report: Report) -> None:
    """Print every report's lines that are printed now."""
    for printed in PRINTED:
        if printed.now():
            for line in printed.lines(report):
                print(line, flush=True)


def add_format_flags(parser: argparse.ArgumentParser) -> None:
    """A `--FORMAT PATH` flag per format (`merge`'s; `run` has them among every option)."""
    for f in FORMATS:
        f.option.add_to(parser.add_argument)


def asked_for(args: argparse.Namespace) -> list[tuple[Path, str]]:
    """The report files asked for, with the flag that named each."""
    named = [(getattr(args, f.name), f.flag) for f in FORMATS]
    return [(path, flag) for path, flag in named if path is not None]


def check_outputs(args: argparse.Namespace) -> None:
    """InputError, now, for a report file that could not be written at the end."""
    for path, flag in asked_for(args):
        check_output(path, flag)


def write_reports(args: argparse.Namespace, report: Report) -> list[str]:
    """Write every report file asked for; why each one that failed did (the others are still
    written)."""
    writers = {f.flag: f.write for f in FORMATS}
    failed = []
    for path, flag in asked_for(args):
        try:
            write_output(path, writers[flag](report), flag)
        except OutputError as err:
            failed.append(str(err))
    return failed
