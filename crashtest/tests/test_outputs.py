"""What the crash test prints and writes, whatever the code under test hands it, and how it ends:
user data cannot inject lines (GitHub Actions' workflow commands) or break a format; output paths
are checked before the test and written safely; a hung observer, Ctrl-C, SIGTERM and a SIGKILL of
the tool itself all end it, and everything it started, within seconds. Workers are SIGKILLed for
real; the apps are in apps/."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from temporal_crashtest._run.devserver import listening

HOSTILE_INPUT = json.dumps(["milk\n::add-mask::SECRET", "eggs\x1b[2J\x07"])
NOTES = ["--worker", "notes_app:build", "--workflow", "notes_app:NotesWorkflow"]
COMMAND = re.compile(r"^\s*::")


def crashtest(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "temporal_crashtest", "run", *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, errors="replace",
    )  # fmt: skip


def started(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "temporal_crashtest", "run", *args],
        env=env, cwd=cwd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def _no_nan(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def test_user_data_cannot_inject_lines_or_break_a_format(
    app_env: dict[str, str], tmp_path: Path
) -> None:
    """Unkeyed notes with hostile inputs (their labels) observed by a hostile observer, on GitHub
    Actions: exit 1 at the two effects; no printed line but our own `::error` lines begins a
    workflow command, none holds ESC, NUL, BEL or `##[`; the JSON is strict JSON, the JUnit file
    parses, every Markdown row has the table's columns; NaN equals itself (the checkpoints ✓,
    with no difference)."""
    out = {name: tmp_path / f"report.{name}" for name in ("json", "md", "xml")}
    args = [*NOTES, "--input", HOSTILE_INPUT, "--observe", "hostile_app:hostile",
            "--json", str(out["json"]), "--markdown", str(out["md"]),
            "--junit-xml", str(out["xml"])]  # fmt: skip
    done = crashtest(args, {**app_env, "GITHUB_ACTIONS": "true"}, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    ours = re.compile(r"^::error title=crashtest [^\n]*::")
    for line in (done.stdout + done.stderr).splitlines():
        assert not COMMAND.match(line) or ours.match(line), line
        assert not set(line) & {"\x1b", "\x00", "\x07"} and "##[" not in line, line
    assert len([line for line in done.stdout.splitlines() if ours.match(line)]) == 2

    report = json.loads(out["json"].read_bytes(), parse_constant=_no_nan)
    verdicts = {c["crash_at"]: (c["matches"], c["diff"]) for c in report["cells"]}
    assert {p for p, (ok, _) in verdicts.items() if not ok} == {"after-effect:1", "after-effect:2"}
    assert all(diff is None for ok, diff in verdicts.values() if ok), verdicts
    assert report["reference"]["not a number"] == "NaN"
    assert "lone \ud800 surrogate" in report["reference"]  # kept, as a JSON escape

    suite = ET.parse(out["xml"]).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "2"
    rows = out["md"].read_text().splitlines()
    assert len(rows) == len(report["cells"]) + 2
    assert len({len(re.findall(r"(?<!\\)\|", row)) for row in rows}) == 1, rows


def test_output_paths_are_checked_before_the_test_and_written_safely(
    app_env: dict[str, str], tmp_path: Path
) -> None:
    """A folder, a device or a symbolic link as an output is refused at once; a report whose
    folder is gone by the end is an error that names it (exit 2), the other outputs and the
    `::error` lines still written; a link planted in a shared logs folder is not followed."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    base = [*NOTES, "--input", '["milk"]', "--observe", "notes_app:notes_of"]
    for path, why in [(tmp_path, "is a folder"), (Path("/dev/full"), "not a regular file"),
                      (link, "is a symbolic link")]:  # fmt: skip
        started_at = time.monotonic()
        done = crashtest([*base, "--json", str(path)], app_env, tmp_path, timeout=60)
        assert done.returncode == 2 and why in done.stderr.splitlines()[-1], done.stderr
        assert time.monotonic() - started_at < 30  # refused before any run
    assert victim.read_text() == "precious\n"

    gone = tmp_path / "gone"
    gone.mkdir()
    junit = tmp_path / "report.xml"
    args = [*NOTES, "--input", '["milk"]', "--observe", "hostile_app:removes_the_report_folder",
            "--json", str(gone / "report.json"), "--junit-xml", str(junit)]  # fmt: skip
    env = {**app_env, "OUTPUT_TO_REMOVE": str(gone), "GITHUB_ACTIONS": "true"}
    done = crashtest(args, env, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"--json {gone / 'report.json'} could not be written" in done.stderr.splitlines()[-1]
    assert ET.parse(junit).getroot().find("testsuite") is not None
    assert "::error title=crashtest NotesWorkflow%3A after-effect%3A1" in done.stdout

    logs = tmp_path / "shared-logs"
    logs.mkdir()
    (logs / "temporal-dev-server.log").symlink_to(victim)
    args = [*base, "--dev-server", "--logs", str(logs), "--points", "after-effect:1"]
    done = crashtest(args, app_env, tmp_path, timeout=60)
    assert done.returncode == 2 and "cannot write the dev server's log" in done.stderr, done.stderr
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (["--points", " , "], "no crash points given"),
        (["--deadline-s", "nan"], "deadline_s must be a positive number of seconds, not nan"),
        (["--deadline-s", "inf"], "deadline_s must be a positive number of seconds, not inf"),
    ],
)
def test_a_test_that_cannot_fail_is_refused(
    app_env: dict[str, str], tmp_path: Path, change: list[str], message: str
) -> None:
    args = [*NOTES, "--input", '["milk"]', "--observe", "notes_app:notes_of", *change]
    done = crashtest(args, app_env, tmp_path, timeout=60)
    assert done.returncode == 2 and message in done.stderr.splitlines()[-1], done.stderr


@pytest.mark.parametrize("observer", ["hangs", "blocks_the_loop"])
def test_a_hung_observer_is_bounded_by_the_deadline(
    app_env: dict[str, str], tmp_path: Path, observer: str
) -> None:
    """A sync observer that never returns, and an async one that calls `time.sleep` (it once
    stalled the event loop its deadline runs on: hung for ever)."""
    args = [*NOTES, "--input", '["milk"]', "--observe", f"hostile_app:{observer}",
            "--deadline-s", "3"]  # fmt: skip
    started_at = time.monotonic()
    done = crashtest(args, app_env, tmp_path, timeout=90)
    assert done.returncode == 2, done.stderr
    assert "did not return within 3 s (--deadline-s)" in done.stderr.splitlines()[-1]
    assert time.monotonic() - started_at < 60


def test_a_hung_factory_is_bounded_by_the_deadline(app_env: dict[str, str], tmp_path: Path) -> None:
    args = ["--worker", "hostile_app:hangs_building", "--workflow", "notes_app:NotesWorkflow",
            "--input", '["milk"]', "--observe", "notes_app:notes_of",
            "--deadline-s", "3"]  # fmt: skip
    done = crashtest(args, app_env, tmp_path, timeout=90)
    assert done.returncode == 2, done.stderr
    assert "the worker did not start polling within 3 s" in done.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    ("sig", "observer"),
    [(signal.SIGINT, "hangs"), (signal.SIGTERM, "hangs"), (signal.SIGTERM, "blocks_the_loop")],
)
def test_a_signal_ends_the_test_and_what_it_started(
    app_env: dict[str, str], tmp_path: Path, sig: signal.Signals, observer: str
) -> None:
    """Ctrl-C (SIGINT) or SIGTERM while a hung observer holds a thread, or blocks the event loop
    itself, on a private dev server: the tool exits with 128 + the signal within seconds, and
    its dev server is gone with it; when it could clean up, it says where the logs are."""
    args = [*NOTES, "--input", '["milk"]', "--observe", f"hostile_app:{observer}", "--dev-server"]
    proc = started(args, app_env, tmp_path)
    port = _dev_server_port(proc)
    _until_said(proc, "reference run of")
    time.sleep(3)  # the reference run is over: its observer hangs
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig, err
    if observer == "hangs":  # the loop is free: the test cleans up and says so
        assert "the workers' logs are in" in err
    assert _until_gone(port, 10), "the dev server outlived the tool"


def test_a_sigkilled_tool_leaves_no_dev_server(app_env: dict[str, str], tmp_path: Path) -> None:
    args = [*NOTES, "--input", '["milk"]', "--observe", "hostile_app:hangs", "--dev-server"]
    proc = started(args, app_env, tmp_path)
    port = _dev_server_port(proc)
    proc.kill()
    proc.communicate(timeout=15)
    assert _until_gone(port, 10), "the dev server outlived the SIGKILLed tool"


def _dev_server_port(proc: subprocess.Popen[str]) -> int:
    """The port of the dev server the tool says it started."""
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if found := re.search(r"a private dev server on 127\.0\.0\.1:(\d+)", line):
            return int(found.group(1))
        assert line or proc.poll() is None, "the tool ended before its dev server started"
    raise AssertionError("no dev server within 60 s")


def _until_said(proc: subprocess.Popen[str], text: str) -> None:
    assert proc.stderr is not None
    while text not in (line := proc.stderr.readline()):
        assert line, f"the tool ended before it said {text!r}"


def _until_gone(port: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not listening("127.0.0.1", port):
            return True
        time.sleep(0.1)
    return not listening("127.0.0.1", port)


# Strings the probe planted in a report's every text (labels, keys, diffs, the web UI's address).
HOSTILE = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "[click](javascript:alert(1))",
    "line\n::add-mask::SECRET",
    "nul\x00 esc\x1b[2J bel\x07 rlo\u202e",
    "`code` | pipe & amp",
    # GitHub's runner trims a line's leading whitespace before it reads a workflow command.
    " ::error title=X::planted",
    "\t\u3000::warning::planted",
]


def test_hostile_strings_through_every_writer() -> None:
    """Each writer (terminal, Markdown, JUnit, JSON, HTML) of a report whose every text is
    hostile: no raw control character, no line that starts a workflow command, no HTML tag or
    Markdown link of the user's, no link that is not http(s)."""
    from temporal_crashtest._points.points import Untested
    from temporal_crashtest._report.ci import junit_xml
    from temporal_crashtest._report.html import html_report
    from temporal_crashtest._report.report import Cell, Report

    for text in HOSTILE:
        cells = [Cell(workflow_id=text, crash_at=text, activity=text, matches=False,
                      observed={text: text}, diff=text, recovery_s=1.0, seconds=1.0,
                      waited_on=[text], in_flight=[text], fast_forward=[text])]  # fmt: skip
        report = Report(workflow=text, activities=[text], reference={text: text}, cells=cells,
                        seconds=1.0, untested=[Untested(text, text)], warnings=[text],
                        ui_url="javascript:alert(1)//", namespace=text)  # fmt: skip
        written = {
            "terminal": "\n".join([report.failure_text(), report.notes(), report.summary()]),
            "markdown": report.table(markdown=True),
            "junit": junit_xml(report),
            "json": report.json_bytes().decode(),
            "html": html_report(report),
        }
        for writer, out in written.items():
            raw = {"\x00", "\x1b", "\x07"} | ({"\u202e"} if writer != "json" else set())
            assert not set(out) & raw, (writer, text)  # JSON keeps the user's data exactly
            assert not any(COMMAND.match(line) for line in out.splitlines()), (writer, text)
            if writer in ("markdown", "html"):
                assert "<script" not in out and "<img" not in out, (writer, out)
                assert 'href="javascript' not in out, writer
        assert not re.search(r"(?<!\\)\]\(javascript:", written["markdown"]), written["markdown"]
        rows = written["markdown"].splitlines()
        assert len({len(re.findall(r"(?<!\\)\|", row)) for row in rows}) == 1, rows


def test_a_fork_server_whose_imports_hang_gives_up(app_env: dict[str, str], tmp_path: Path) -> None:
    """A `--deploy-tree` (or worker) module that sleeps at import once left the tool silent for
    good: its fork server's readiness had no deadline. It now says why within the timeout."""
    import asyncio
    import os

    from temporal_crashtest._run.processes import CANNOT_IMPORT, Processes

    async def start() -> str | None:
        procs = Processes(tmp_path, app_env)
        try:
            return await procs.start_fork_server(
                ["--worker", "sleepy_import_app:build"], import_timeout_s=3
            )
        finally:
            await procs.kill_all_and_reap()

    started_at = time.monotonic()
    os.environ.setdefault("NOTES_DIR", str(tmp_path))
    why = asyncio.run(start())
    assert why is not None and why.startswith(CANNOT_IMPORT), why
    assert "did not finish within 3 s" in why
    assert time.monotonic() - started_at < 30


def test_the_page_draws_the_run_without_a_crash_once() -> None:
    """The probe: `merge --html` of 3,000 cells with a 3,000-bar reference timeline drew the
    reference again in every cell (42 s, 1.9 GB, a MemoryError). It is drawn once and shown in
    each cell by reference; a crashed run's own timeline is drawn up to a budget of bars, the
    rest left out in one line."""
    from temporal_crashtest._report.html import MAX_BARS, html_report
    from temporal_crashtest._report.report import Cell, Report

    def timeline(name: str, bars: int) -> dict[str, object]:
        return {"workflow_id": name, "run_id": "r", "length": bars * 0.01 + 1, "marks": [],
                "bars": [{"label": f"a{i}", "scheduled": i * 0.01, "started": i * 0.01,
                          "closed": i * 0.01 + 0.005, "attempt": 1, "outcome": "completed"}
                         for i in range(bars)]}  # fmt: skip

    cells = [Cell(workflow_id=f"c{i}", crash_at=f"after-effect:{i + 1}", activity="a",
                  matches=True, observed=None, diff=None, recovery_s=None, seconds=1.0)
             for i in range(3000)]  # fmt: skip
    crashed = {f"c{i}": timeline(f"c{i}", 3000) for i in range(20)}
    report = Report(workflow="W", activities=["a"], reference={}, cells=cells, seconds=1.0,
                    reference_workflow_id="ref",
                    timelines={"ref": timeline("ref", 3000), **crashed})  # fmt: skip
    page = html_report(report)
    assert page.count(">a2999<") + page.count(">a2999 ") <= MAX_BARS // 3000 + 1
    assert page.count('<use href="#reference-timeline"/>') == 3000
    assert len(page) < 20 * 2**20, len(page)
    drawn = MAX_BARS // 3000 - 1  # the reference's share is taken first
    assert f"{20 - drawn} timeline(s) left out: a page draws at most {MAX_BARS} bars" in page


def test_an_unknown_argument_is_shown_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    """An argument `run` did not know was echoed as it was: its escape codes reached the
    terminal."""
    from temporal_crashtest._front.cli import command_line

    with pytest.raises(SystemExit) as ended:
        command_line()[0].parse_args(["run", "--workflow", "W", "--input", "1", "\x1b[2J\x07"])
    assert ended.value.code == 2
    said = capsys.readouterr().err
    assert "\\x1b[2J\\x07" in said and "\x1b" not in said and "\x07" not in said, said
