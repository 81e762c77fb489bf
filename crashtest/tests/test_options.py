"""The options of a crash test, in the three places a user gives them — the command line's
`run`, `CrashTestOptions` (with `Target`) and the pytest fixture — kept in step: a flag added to
one and not the others fails here, naming it. In process, no server."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest
from temporal_crashtest import CrashTestOptions, Target
from temporal_crashtest._front.cli import parse_args
from temporal_crashtest._observers.given import KINDS
from temporal_crashtest.pytest_plugin import OWN, _command, every_option

# What the API calls some of the command line's options, and what only one of them has.
API_NAMES = {"logs": "log_dir", "plugin": "plugins", "observe": "observe"}
CLI_ONLY = {"json", "markdown", "html", "junit_xml"}  # report formats: the CLI writes them
API_ONLY = {"progress", "say", "timelines", "env", "resume_after_s"}  # callbacks, derived, Python


def observer_flags() -> set[str]:
    """The observer kinds' flags, by their argparse names: in the API, their settings
    (`CrashTestOptions.observers`, or `http`)."""
    parser = argparse.ArgumentParser()
    for kind in KINDS:
        kind.add_flags(parser.add_argument)
    return set(vars(parser.parse_args([])))


def run_flags() -> set[str]:
    """Every option of `python -m temporal_crashtest run`, by its argparse name."""
    required = ["run", "--worker", "m:f", "--workflow", "W", "--input", "{}"]
    return set(vars(parse_args(required))) - {"command"}


def test_the_fixture_takes_every_option_of_the_command_line() -> None:
    fixture = set(every_option()) | set(OWN) | {"plugin"}  # `plugins`: --plugin once per item
    missing = run_flags() - fixture
    assert not missing, f"the pytest fixture lacks {sorted(missing)}"
    extra = set(every_option()) - run_flags() - {"plugins", "env", "expect_version"}
    assert not extra, f"the fixture has options the command line lacks: {sorted(extra)}"


def test_the_api_takes_every_option_of_the_command_line() -> None:
    api = {f.name for f in dataclasses.fields(CrashTestOptions)}
    api |= {f.name for f in dataclasses.fields(Target)} | {"observe"}
    wanted = {API_NAMES.get(name, name) for name in run_flags() - CLI_ONLY - observer_flags()}
    wanted -= {"expect_version"}  # --expect old|new is `expect_version` in the API
    missing = wanted - api
    assert not missing, f"CrashTestOptions or Target lacks {sorted(missing)}"
    cli = {API_NAMES.get(name, name) for name in run_flags()} | {"expect_version", "input"}
    unmatched = api - cli - API_ONLY - {"workflow", "worker", "observers"}
    assert not unmatched, f"the command line lacks {sorted(unmatched)}"


def test_each_fixture_option_becomes_its_flag(tmp_path: Path) -> None:
    given = {
        "points": ["after-effect:1", "reset:2"],
        "http": ["shop.local", "mail.local"],
        "http_paid": "api.example.com",
        "shard": (2, 3),
        "html": tmp_path / "r.html",
        "dev_server": True,
        "exact": False,
        "plugins": ["a:b", "c:d"],
        "env": {"X": "1"},
    }
    cmd = _command("m:build", "m:W", {"a": 1}, None, tmp_path / "r.json", given)
    words = " ".join(cmd[1:])
    assert "--points after-effect:1,reset:2" in words and "--shard 2/3" in words
    assert "--http shop.local,mail.local" in words and "--http-paid api.example.com" in words
    assert f"--html {tmp_path / 'r.html'}" in words and "--dev-server" in words
    assert "--plugin a:b --plugin c:d" in words
    assert "--exact" not in words and "--observe" not in words and "X" not in words
    args = parse_args(cmd[3:])  # the command line takes every word the fixture wrote
    assert args.shard == "2/3" and args.http == "shop.local,mail.local" and args.dev_server
    every_host = _command("m:build", "m:W", 1, "m:obs", tmp_path / "r.json", {"http": True})
    assert every_host[-1] == "--http"
    assert parse_args(every_host[3:]).http == ""


def test_an_unknown_fixture_option_is_named(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_it(crash_test):
            crash_test(worker="m:f", workflow="W", input=1, observe="m:o", shards=2)
        """
    )
    result = pytester.runpytest_subprocess()
    result.stdout.fnmatch_lines(["*unknown options ?'shards'?*"])


OPTIONS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "options.md"
HEADER = """\
# temporal-crashtest: every option

[← the README](../README.md)

Each option is a flag of `python -m temporal_crashtest run`, a keyword of the pytest fixture
`crash_test` (the flag's name with `_`: `--deadline-s` is `deadline_s=`, `--http` is `http=True`
or `http=["shop.local"]`, `--plugin` is `plugins=[...]`), and a field of `CrashTestOptions` or
`Target` in Python (`--logs` is `log_dir`, `--expect old|new` is `expect_version`,
`--http*` make one `HttpObserver`). This page is written from the command line's parser:
`crashtest/tests/test_options.py` fails when they differ, and `WRITE_DOCS=1 python -m pytest
crashtest/tests/test_options.py` writes it again.

| flag | value | default | what |
|---|---|---|---|
"""


def options_page() -> str:
    """The options reference, from the `run` command's parser."""
    from temporal_crashtest._front.cli import command_line

    rows = []
    for action in command_line()[1]._actions:
        if not action.option_strings or action.dest == "help":
            continue
        value = "" if action.nargs == 0 else (action.metavar or action.dest.upper())
        default = action.default
        shown = "" if default in (None, False, [], "") or action.dest == "jobs" else f"{default}"
        if action.dest == "jobs":
            shown = "8 per core"
        what = " ".join((action.help or "").split()).replace("|", "\\|")
        flag = ", ".join(action.option_strings)
        rows.append(f"| `{flag}` | {f'`{value}`' if value else ''} | {shown} | {what} |")
    return HEADER + "\n".join(rows) + "\n"


def test_the_options_page_is_the_command_lines() -> None:
    import os

    page = options_page()
    if os.environ.get("WRITE_DOCS"):
        OPTIONS_PAGE.write_text(page)
    assert OPTIONS_PAGE.read_text() == page, (
        "crashtest/docs/options.md differs from the command line: "
        "WRITE_DOCS=1 python -m pytest crashtest/tests/test_options.py writes it again"
    )
