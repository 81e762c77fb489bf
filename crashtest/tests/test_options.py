"""The options of a crash test, each declared once (`_front.options.every_option`): the command
line's `run`, `CrashTestOptions` and `Target` (with its versions), the pytest fixture and
crashtest/docs/options.md are all made from the declarations — no table of renames keeps them in
step. In process, no server."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from temporal_crashtest import CrashTestOptions, Target, Version
from temporal_crashtest._front.cli import command_line, from_args, parse_args
from temporal_crashtest._front.options import every_option
from temporal_crashtest._option import Option, Part, Reads
from temporal_crashtest.pytest_plugin import _command, keywords

VALUE_CLASSES = {Part.TARGET: Target, Part.OLD: Version, Part.NEW: Version}


def test_each_option_is_declared_once_and_is_a_field_of_its_part() -> None:
    names = [o.name for o in every_option()]
    assert len(names) == len(set(names)), "an option declared twice"
    fields = {
        part: {f.name for f in dataclasses.fields(cls)} for part, cls in VALUE_CLASSES.items()
    }
    fields[Part.RUN] = {f.name for f in dataclasses.fields(CrashTestOptions)}
    for option in every_option():
        assert option.help, f"{option.name} says nothing of what it holds"
        if option.part in fields:
            assert option.attribute in fields[option.part], option.name
    declared = {(o.part, o.attribute) for o in every_option()}
    for part, names_there in fields.items():
        kept = names_there - {"old", "new"}  # Target's versions: each made of its own options
        missing = {name for name in kept if (part, name) not in declared}
        assert not missing, f"{part.value} has fields no option declares: {sorted(missing)}"


def test_the_defaults_are_the_declarations() -> None:
    made = CrashTestOptions()
    for option in every_option():
        if option.part is Part.RUN and option.default_factory is None:
            assert getattr(made, option.name) == option.default, option.name


def test_the_command_line_makes_the_one_calls_values(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    args = parse_args(
        ["run", "--worker", "json:loads", "--workflow", "W", "--input", '{"a": 1}',
         "--observe", "json:dumps", "--plugin", "json:loads", "--plugins", "json:dumps",
         "--worker-tree", str(tmp_path / "base"), "--deploy-cmd", "node lib/worker.js v2",
         "--points", "after-effect:1,reset:2", "--points", "in-task:1", "--shard", "2/3",
         "--resume-after-s", "0.5", "--logs", str(tmp_path / "logs"), "--http", "shop.local"]
    )  # fmt: skip
    with pytest.raises(Exception, match="deploy between a worker command and a Python factory"):
        from_args(args)
    args.deploy_cmd = None
    target, observe, options = from_args(args)
    assert target.old == Version("json:loads", str(tmp_path / "base"))
    assert target.new is None and target.plugins == ("json:loads", "json:dumps")
    assert target.input == {"a": 1} and callable(observe)
    assert options.points == ("after-effect:1", "reset:2", "in-task:1")
    assert options.shard == (2, 3) and options.resume_after_s == 0.5
    assert options.logs == tmp_path / "logs"
    assert [type(o).__name__ for o in options.observers] == ["HttpObserver"]


def test_each_fixture_keyword_becomes_its_flag(tmp_path: Path) -> None:
    assert set(keywords()) == {
        o.name for o in every_option() if o.reads is not Reads.NO_FLAG and o.name != "json"
    } | {"env"}
    given = {
        "worker": "m:build",
        "workflow": "m:W",
        "input": {"a": 1},
        "points": ["after-effect:1", "reset:2"],
        "http": ["shop.local", "mail.local"],
        "http_paid": "api.example.com",
        "shard": (2, 3),
        "html": tmp_path / "r.html",
        "dev_server": True,
        "exact": False,
        "plugins": ["a:b", "c:d"],
        "env": {"X": "1"},
        "expect": None,
    }
    cmd = _command(tmp_path / "r.json", given)
    words = " ".join(cmd[1:])
    assert "--points after-effect:1,reset:2" in words and "--shard 2/3" in words
    assert "--http shop.local,mail.local" in words and "--http-paid api.example.com" in words
    assert f"--html {tmp_path / 'r.html'}" in words and "--dev-server" in words
    assert "--plugins a:b,c:d" in words and "--expect null" in words
    assert "--exact" not in words and "--observe" not in words and "X" not in words
    args = parse_args(cmd[3:])  # the command line takes every word the fixture wrote
    assert args.shard == "2/3" and args.http == "shop.local,mail.local" and args.dev_server
    every_host = _command(tmp_path / "r.json", {**given, "http": True})
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

Each option is a flag of `python -m temporal_crashtest run` and a keyword of the pytest fixture
`crash_test`, both its name (`--deadline-s` is `deadline_s=`; `--http` alone is `http=True`, with
hosts `http=["shop.local"]`; a list is comma-separated, or the flag given again), and in Python a
field of the value it belongs to (the column "in Python"). Each is declared once, beside that
value; this page is written from the declarations (`crashtest/tests/test_options.py` fails when
they differ, and `WRITE_DOCS=1 python -m pytest crashtest/tests/test_options.py` writes it again).

| flag | value | default | in Python | what |
|---|---|---|---|---|
"""


SILENT = (Reads.SWITCH, Reads.NO_FLAG)  # no value to write after the flag


def _row(option: Option) -> str:
    flag = ", ".join(f"`{f}`" for f in (option.flag, *option.also))
    if option.reads is Reads.NO_FLAG:
        flag = "(Python only)"
    value = option.metavar or ("" if option.reads in SILENT else option.reads.value)
    if option.choices:
        value = "|".join(option.choices)
    default = option.default_text
    if default is None:
        given = option.initial()
        default = "" if given is None or given is False or given in ((), {}, "") else str(given)
    where = {
        Part.OLD: f"`Target.old.{option.attribute}`",
        Part.NEW: f"`Target.new.{option.attribute}`",
        Part.CALL: "`run_crash_test(observe=)`",
        Part.OBSERVER: "`HttpObserver`, among `observers`",
        Part.REPORT: "`Report` (its methods)",
    }.get(option.part, f"`{option.part.value}.{option.attribute}`")
    what = " ".join(option.help.split()).replace("|", "\\|")
    return f"| {flag} | {f'`{value}`' if value else ''} | {default} | {where} | {what} |"


def options_page() -> str:
    """The options reference, from the declarations."""
    return HEADER + "\n".join(_row(o) for o in every_option()) + "\n"


def test_the_options_page_is_the_declarations() -> None:
    page = options_page()
    if os.environ.get("WRITE_DOCS"):
        OPTIONS_PAGE.write_text(page)
    assert OPTIONS_PAGE.read_text() == page, (
        "crashtest/docs/options.md differs from the declarations: "
        "WRITE_DOCS=1 python -m pytest crashtest/tests/test_options.py writes it again"
    )


def test_run_lists_every_flag_in_the_declared_order() -> None:
    run = command_line()[1]
    flags = [a.option_strings[0] for a in run._actions if a.option_strings and a.dest != "help"]
    assert flags == [o.flag for o in every_option() if o.reads is not Reads.NO_FLAG]
