"""The documentation against the code: every setting the code reads has a row in the settings
table (and every row is read), and every relative link in the Markdown resolves, anchors
included. In-process: no server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import ROOT

SETTINGS_PAGE = ROOT / "docs" / "operations.md"
# Where the code that reads settings lives (the crash tool documents its own).
CODE = ["infra", "agent", "activities", "workflows", "grocer", "journal", "dbos_agent", "crashlab",
        "bench", "worker.py", "starter.py"]  # fmt: skip
# The Temporal client settings are read by temporalio.envconfig, not by our code.
ENVCONFIG = re.compile(r"^TEMPORAL_(?!ADDRESS$|UI_URL$)")
_READ = re.compile(
    r"(?:env_str|env_number|env_port|environ\.get|getenv|env\.get)\(\s*(\"[A-Z][A-Z0-9_]+\"|[A-Z][A-Z0-9_]+)"
)
_CONSTANT = re.compile(r'^([A-Z][A-Z0-9_]*) = "([A-Z][A-Z0-9_]+)"$', re.MULTILINE)
_ROW = re.compile(r"^\| `([A-Z][A-Z0-9_*]+)` \|", re.MULTILINE)
MARKDOWN = [
    ROOT / "README.md",
    ROOT / "crashtest" / "README.md",
    *sorted((ROOT / "crashtest" / "docs").glob("*.md")),
    *sorted((ROOT / "docs").glob("*.md")),
]
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def settings_read(paths: list[Path]) -> set[str]:
    """The environment variables the Python files under `paths` read through our readers or
    os.environ (by name, or by a module constant holding the name)."""
    found: set[str] = set()
    for path in paths:
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            text = file.read_text()
            constants = dict(_CONSTANT.findall(text))
            for name in _READ.findall(text):
                found.add(name.strip('"') if name.startswith('"') else constants.get(name, name))
    return found


def settings_in_table(page: Path) -> set[str]:
    text = page.read_text()
    table = text[text.index("## Settings") :]
    table = table[: table.index("\n## ")]
    return set(_ROW.findall(table))


def test_every_setting_read_has_a_row_and_every_row_is_read() -> None:
    read = settings_read([ROOT / p for p in CODE])
    rows = settings_in_table(SETTINGS_PAGE)
    assert read - rows == set(), f"settings without a row in {SETTINGS_PAGE.name}"
    unread = {r for r in rows - read if not ENVCONFIG.match(r)}
    assert unread == set(), "rows for settings nothing reads"


def test_the_settings_check_sees_a_new_setting(tmp_path: Path) -> None:
    """The check must be able to fail: a setting read by name or through a constant is found."""
    (tmp_path / "new.py").write_text(
        'FLAG = "SHINY_NEW_FLAG"\nx = env_str("SHINY_NEW_SETTING")\ny = env_str(FLAG)\n'
    )
    assert settings_read([tmp_path]) == {"SHINY_NEW_SETTING", "SHINY_NEW_FLAG"}
    assert "SHINY_NEW_SETTING" not in settings_in_table(SETTINGS_PAGE)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", page.read_text(), re.MULTILINE)
    in_code = set(
        re.findall(
            r"^#{1,6} (.+)$",
            "".join(re.findall(r"```.*?```", page.read_text(), re.DOTALL)),
            re.MULTILINE,
        )
    )
    return {github_anchor(h) for h in headings if h not in in_code}


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto: not checked here (no network)
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(target)
    assert broken == []
