"""crashtest's `--html` report, opened in a real browser: headless Chromium (Debian's package)
renders the payments example's crash test (unkeyed charges), takes a screenshot, and gives back
the page as it drew it; the ✗ rows, the links to the web UI, the untested list and the escaping
of the workflow's own strings are checked there, and that nothing failed to load.

`.ci/run` installs Chromium and sets CHROMIUM_REQUIRED=1, so there a missing browser fails the
test; elsewhere it is skipped with the command that installs it."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.helpers import child_env, payments, run_python

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("CHROMIUM_REQUIRED") != "1":
    pytest.skip(
        "Chromium is not installed (apt-get install chromium); .ci/run installs it",
        allow_module_level=True,
    )

# The customer's name is the workflow's own string: it must show as text, never as markup.
INPUT = '{"customer": "<b>acme</b>", "invoices": ["inv-1", "inv-2", "inv-3"]}'
WIDTH = 1100


def browser(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None, "Chromium is not installed: apt-get install chromium"
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0", f"--window-size={WIDTH},2400", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


class Page(HTMLParser):
    """The rendered page: its table rows (class, text), links, resources it would load."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, str]] = []
        self.links: list[str] = []
        self.loads: list[str] = []  # src= and <link href=>: a self-contained page has none
        self.bold = 0
        self._row: list[str] | None = None
        self._class = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr":
            self._row, self._class = [], a.get("class") or ""
        if tag == "a" and a.get("href"):
            self.links.append(str(a["href"]))
        if "src" in a or tag == "link":
            self.loads.append(f"{tag} {a}")
        if tag == "b":
            self.bold += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self._row is not None:
            self.rows.append((self._class, " ".join(self._row)))
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is not None and data.strip():
            self._row.append(data.strip())


def test_the_report_opens_in_a_browser(db_url: str, temporal_address: str, tmp_path: Path) -> None:
    html, report_json = tmp_path / "report.html", tmp_path / "report.json"
    args = payments("unkeyed_worker")
    args[args.index("--input") + 1] = INPUT
    env = child_env(
        db_url, TEMPORAL_ADDRESS=temporal_address, TEMPORAL_UI_URL="http://ui.test:8233"
    )
    done = run_python(
        ["-m", "temporal_crashtest", "run", *args, "--html", str(html), "--json", str(report_json)],
        env,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(report_json.read_text())
    failed = [c for c in report["cells"] if not c["matches"]]
    assert failed

    shot = tmp_path / "report.png"
    drawn = browser(f"--screenshot={shot}", html.as_uri())
    assert drawn.returncode == 0, drawn.stderr
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">I", png[16:20])[0] == WIDTH
    dom = browser("--dump-dom", html.as_uri())
    assert dom.returncode == 0, dom.stderr
    # Nothing failed to load: no resource error in the browser's log, none to load at all.
    assert not re.search(r"Failed to load|net::ERR_|Uncaught", dom.stderr + drawn.stderr)
    page = Page()
    page.feed(dom.stdout)
    assert page.loads == []

    fail_rows = [text for cls, text in page.rows if cls == "fail"]
    assert len(fail_rows) == len(failed)
    for cell, text in zip(failed, fail_rows, strict=True):
        assert text.startswith(cell["crash_at"]) and "✗" in text and cell["diff"] in text, text
    for cell in report["cells"]:
        assert (
            f"http://ui.test:8233/namespaces/default/workflows/{cell['workflow_id']}" in page.links
        )
        assert f"#cell-{re.sub(r'[^0-9A-Za-z]', '-', cell['crash_at'])}" in page.links
    for untested in report["untested"]:
        assert any(untested["boundary"] in text for _, text in page.rows)
    assert page.bold == 0 and "<b>acme</b>" in dom.stdout.replace("&lt;", "<").replace("&gt;", ">")
    assert dom.stdout.count("<svg") == 1 + 2 * len(report["cells"])  # a timeline per run shown
