"""DESIGN.md's arrows, read from the imports: the product (`infra`, `agent`, `activities`,
`workflows`, `grocer`, `worker.py`, `starter.py`) imports nothing of the crash tool or the lab,
dependencies point one way, and the tool imports nothing of ours."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

# What each part may import of this repository (itself always).
MAY_IMPORT: dict[str, set[str]] = {
    "infra": set(),
    "agent": {"infra"},
    "activities": {"agent", "infra"},
    "workflows": {"activities", "agent", "infra"},
    "grocer": {"infra"},
    "journal": {"agent", "infra"},
    "worker": {"workflows", "activities", "agent", "infra"},
    "starter": {"workflows", "activities", "agent", "infra"},
    "temporal_crashtest": set(),
}
OURS = {*MAY_IMPORT, "crashlab", "bench", "examples", "tests"}


def imported(path: Path) -> set[str]:
    """The top-level names of the absolute imports in a module."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def part_files(part: str) -> list[Path]:
    if part == "temporal_crashtest":
        return sorted((ROOT / "crashtest" / "src" / part).rglob("*.py"))
    single = ROOT / f"{part}.py"
    return [single] if single.exists() else sorted((ROOT / part).rglob("*.py"))


def violations() -> list[str]:
    found = []
    for part, allowed in MAY_IMPORT.items():
        for path in part_files(part):
            for name in sorted(imported(path) & OURS - allowed - {part}):
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    return found


def test_dependencies_point_one_way() -> None:
    assert all(part_files(part) for part in MAY_IMPORT)
    assert violations() == []
