"""Every module and file the prose names exists: docstrings and comments in the code, the docs
and the READMEs. A renamed module leaves its old name behind in text that nothing runs; this
test is what notices. In-process: no server."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

from tests.schedule import TAKEN_FIRST

ROOT = Path(__file__).resolve().parents[1]
# Where a package's modules live when it is not at the top of the repository.
SOURCE_ROOTS = {"temporal_crashtest": ROOT / "crashtest" / "src" / "temporal_crashtest"}
# A dotted name counts as a module reference only under one of our own packages.
PACKAGES = set(
    "activities agent bench crashlab crashtest dbos_agent examples grocer infra journal tests "
    "workflows temporal_crashtest".split()
)
_DOTTED = re.compile(r"(?<![\w./-])([a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_FILE_SUFFIXES = {"py", "md", "json", "xml", "sql", "yml", "yaml", "sh", "toml", "log", "html"}
_PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]+\.(?:py|md|sql|yml|yaml|sh|json|toml))\b")


def tracked(*patterns: str) -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [ROOT / line for line in listed.stdout.split()]


def prose(path: Path) -> str:
    """The text a reader reads: a Markdown file whole, a module's docstrings and comments."""
    text = path.read_text()
    if path.suffix != ".py":
        return text
    parts = [line.split("#", 1)[1] for line in text.splitlines() if "#" in line]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            parts.append(ast.get_docstring(node) or "")
    return "\n".join(parts)


def module_file(dotted: list[str]) -> Path | None:
    """The module `dotted` names (its longest prefix that is a module), if what follows that
    prefix is defined in it (`agent.llm.call_model`, `module.Class.method`); None if not."""
    base = SOURCE_ROOTS.get(dotted[0], ROOT / dotted[0])
    for end in range(len(dotted), 0, -1):
        folder = base.joinpath(*dotted[1:end])
        for candidate in (folder.with_suffix(".py"), folder / "__init__.py"):
            if candidate.is_file():
                return candidate if end == len(dotted) or _defines(candidate, dotted[end]) else None
    return None


def _defines(module: Path, name: str) -> bool:
    """Whether `module` defines `name`: a function, a class or an assignment at any depth, or
    a public name a package imports on first use (`"effect": "_worker.effects",` in its
    `_WHERE`)."""
    pattern = rf"^\s*(?:async\s+def|def|class)\s+{re.escape(name)}\b|^\s*{re.escape(name)}\s*[:=]"
    pattern += rf'|^\s*"{re.escape(name)}":\s*"_[\w.]+",$'
    return re.search(pattern, module.read_text(), re.MULTILINE) is not None


def stale_names(path: Path) -> list[str]:
    text = prose(path)
    found = []
    for match in _DOTTED.finditer(text):
        dotted = match[1].rstrip(".").split(".")
        if dotted[-1] in _FILE_SUFFIXES:  # a file's name (`grocer.py`): a path names it
            continue
        if dotted[0] in PACKAGES and len(dotted) > 1 and module_file(dotted) is None:
            found.append(match[1])
    for match in _PATH.finditer(text):
        name = match[1]
        candidates = [ROOT / name, path.parent / name, ROOT / "crashtest" / name]
        if name.split("/")[0] in {*PACKAGES, "docs", "deploy", "crashtest", ".ci"} and not any(
            c.exists() for c in candidates
        ):
            found.append(name)
    return found


def test_every_module_and_file_named_in_prose_exists() -> None:
    stale = {
        str(path.relative_to(ROOT)): names
        for path in tracked("*.py", "*.md")
        if (names := stale_names(path))
    }
    assert stale == {}


def test_every_file_the_suites_schedule_names_exists() -> None:
    """A test file renamed would silently lose its place at the front (tests/schedule.py)."""
    assert [name for name in TAKEN_FIRST if not (ROOT / name).is_file()] == []
