"""The layout's arrows, read from the imports of every Python file in the repository.

- The product (`infra`, `agent`, `activities`, `workflows`, `grocer`, `worker.py`, `starter.py`)
  points one way — workflows → activities → agent → infra, grocer → infra — and imports nothing
  of the crash tool or the labs: the production image carries no crash machinery.
- The journal and the agent on DBOS (`dbos_agent`) use the agent and infra; the crash tool
  (`crashtest/src`) imports nothing of ours.
- The labs: `bench` may use `crashlab`, never the reverse (what both use lives in `infra`);
  `examples` use the tool and the product; `tests` may use everything.
- Outside `crashtest/`, the tool is used through its public surface (`temporal_crashtest`, its
  `worker` module for `python -m`), never a private `_module`.
- No import circle between modules, and no two folders that import each other.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.helpers import ROOT

PRODUCT = {"infra", "agent", "activities", "workflows", "grocer", "worker", "starter"}
# What each part may import of this repository (itself always).
MAY_IMPORT: dict[str, set[str]] = {
    "infra": set(),
    "agent": {"infra"},
    "activities": {"agent", "infra"},
    "workflows": {"activities", "agent", "infra"},
    "grocer": {"infra"},
    "journal": {"agent", "infra"},
    "dbos_agent": {"agent", "infra"},
    "worker": {"workflows", "activities", "agent", "infra"},
    "starter": {"workflows", "activities", "agent", "infra"},
    "temporal_crashtest": set(),
    "crashlab": {*PRODUCT, "journal", "dbos_agent", "temporal_crashtest"},
    "bench": {*PRODUCT, "journal", "dbos_agent", "temporal_crashtest", "crashlab"},
    "examples": {*PRODUCT, "temporal_crashtest"},
    "tests": {
        *PRODUCT,
        "journal",
        "dbos_agent",
        "temporal_crashtest",
        "crashlab",
        "bench",
        "examples",
    },
}
SKIPPED = {".venv", ".data", ".git", "build", "__pycache__"}


def imports(path: Path) -> set[str]:
    """The dotted names of the absolute imports in a module (`a.b` and, for `from a import b`,
    both `a` and `a.b`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def python_files() -> dict[str, Path]:
    """Every module of ours by dotted name (the tool's under `temporal_crashtest`, its tests
    under `crashtest_tests`)."""
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if SKIPPED & set(parts) or "histories" in parts:
            continue
        if parts[0] == "crashtest":
            parts = parts[2:] if parts[1] == "src" else ("crashtest_tests", *parts[2:])
        name = ".".join(parts).removesuffix(".__init__")
        found[name] = path
    return found


def part_of(module: str) -> str:
    return module.split(".")[0]


def test_every_part_is_covered() -> None:
    parts = {part_of(m) for m in python_files()} - {"crashtest_tests"}
    assert parts == set(MAY_IMPORT), parts ^ set(MAY_IMPORT)


def test_dependencies_point_the_allowed_way() -> None:
    modules = python_files()
    ours = set(MAY_IMPORT)
    found = []
    for module, path in modules.items():
        part = part_of(module)
        if part == "crashtest_tests":
            continue
        for name in sorted({part_of(n) for n in imports(path)} & ours - MAY_IMPORT[part] - {part}):
            found.append(f"{path.relative_to(ROOT)} imports {name}")
    assert found == []


def test_the_tool_is_used_through_its_public_surface_outside_crashtest() -> None:
    found = []
    for module, path in python_files().items():
        if part_of(module) in ("temporal_crashtest", "crashtest_tests"):
            continue
        for name in imports(path):
            if name.startswith("temporal_crashtest.") and name.split(".")[1].startswith("_"):
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    assert found == []


def test_no_import_circle_and_no_two_way_folders() -> None:
    modules = python_files()
    edges = {m: {n for n in imports(p) if n in modules and n != m} for m, p in modules.items()}
    # Tarjan's strongly connected components: any of more than one module is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                circles.append(sorted([v, *component]))

    for module in modules:
        if module not in index:
            visit(module)
    assert circles == []
    folders: dict[str, set[str]] = defaultdict(set)
    for module, targets in edges.items():
        folders[part_of(module)] |= {part_of(t) for t in targets} - {part_of(module)}
    two_way = sorted(
        {tuple(sorted((a, b))) for a in folders for b in folders[a] if a in folders[b]}
    )
    assert two_way == []


LONGEST_FUNCTION = 60  # lines: past it a function is where a change piles up
NOT_PRODUCT = ("tests", "examples", ".venv", ".data", "build")


def test_no_product_function_is_over_60_lines() -> None:
    """Every function of the product and the tool (not tests, not examples) fits in 60 lines:
    the last cleanup's four came back within a round, so a machine holds the line."""
    long = []
    tops = [p for p in ROOT.iterdir() if p.name not in NOT_PRODUCT and not p.name.startswith(".")]
    paths = [p for top in tops for p in ([top] if top.is_file() else top.rglob("*.py"))]
    for path in sorted(p for p in paths if p.suffix == ".py"):
        parts = path.relative_to(ROOT).parts
        if "tests" in parts or "build" in parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > LONGEST_FUNCTION:
                    long.append(f"{path.relative_to(ROOT)}:{node.name} ({lines} lines)")
    assert not long, "split into named steps that return values: " + ", ".join(long)


# Functions the tool and the product each need and cannot share (the product imports nothing of
# the tool, the tool nothing of ours): (the tool's file, the product's file, the function).
TWINS = [
    ("crashtest/src/temporal_crashtest/_exits.py", "infra/cli.py", "exit_now"),
    ("crashtest/src/temporal_crashtest/_run/devserver.py", "infra/processes.py", "listening"),
]


def _function(path: str, name: str) -> str:
    tree = ast.parse((ROOT / path).read_text())
    [node] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return ast.dump(node)


def test_the_copies_the_tool_and_the_product_keep_are_the_same() -> None:
    """`exit_now` and `listening` stand in the tool and in the product, which may not import
    each other: a fix to one copy is a fix to both, or this fails."""
    for tool, product, name in TWINS:
        assert _function(tool, name) == _function(product, name), (name, tool, product)
