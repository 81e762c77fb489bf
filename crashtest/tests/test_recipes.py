"""The recipes of docs/architecture.md ("To add …") kept true: every file a recipe names exists
(a `<name>` in it: its folder, and a file of that pattern there), and a toy observer and a toy
report format, added to a copy of the package by exactly the files their recipes name, are taken
up by the command line, the pytest fixture's keywords, the observers and the report. In process
and in one child process on the copy; no server."""

from __future__ import annotations

import ast
import graphlib
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "crashtest" / "src" / "temporal_crashtest"
DOC = ROOT / "docs" / "architecture.md"
# A file or folder of the repository, as the doc writes it in backticks.
NAMED = re.compile(r"`((?:[\w.<>-]+/)+(?:[\w.<>-]+\.(?:py|md|toml))?)`")


def recipes() -> dict[str, str]:
    """Each recipe's text, by its bold title (`**An observer**`), from "To add …" on."""
    section = DOC.read_text().split("## To add …", 1)[1]
    parts = re.split(r"\*\*([^*]+)\*\*", section)
    return {title: text for title, text in zip(parts[1::2], parts[2::2], strict=True)}


def named_in(text: str) -> list[str]:
    return list(dict.fromkeys(NAMED.findall(text)))


def touched_by(title: str) -> list[str]:
    """The files a recipe touches: its list's items that begin with a path."""
    return re.findall(r"^- `([^`]+)`", recipes()[title], flags=re.MULTILINE)


def test_every_file_a_recipe_names_exists() -> None:
    everything = named_in(DOC.read_text())
    assert len(everything) > 20, everything  # the pattern still finds what the doc names
    for path in everything:
        if "<" not in path:  # from the repository's root, or the package's (`_run/cell.py`)
            found = (ROOT / path).exists() or (PACKAGE / path).exists()
            assert found, f"docs/architecture.md names {path}: no such file"
            continue
        folder, _, pattern = path.rpartition("/")
        if "<" in folder:  # `<engine>/`: a package of the recipe's own
            continue
        assert (ROOT / folder).is_dir(), f"docs/architecture.md names {path}: no folder {folder}"
        if pattern:  # `with_<library>.py`: one of that pattern is there
            glob = re.sub(r"<[^>]+>", "*", pattern)
            assert list((ROOT / folder).glob(glob)), f"no {glob} in {folder} ({path})"


TOY_OBSERVER = '''
"""A toy observer: each run's end is a greeting (the recipe's trial)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporal_crashtest._observers import Kind
from temporal_crashtest._option import Option, Part


@dataclass(frozen=True)
class ToyObserver:
    greeting: str

    def check(self) -> None:
        pass

    def observer(self, log_dir: Path, deadline_s: float) -> ToyView:
        return ToyView(self.greeting)


@dataclass(frozen=True)
class ToyView:
    greeting: str
    name: str = "toy"
    half: str | None = None

    def worker_env(self) -> dict[str, str]:
        return {}

    async def view(self, workflow_id: str) -> Any:
        return {"greeting": self.greeting, "run": workflow_id}

    def untested(self) -> list[tuple[str, str]]:
        return []


def _settings(values: Mapping[str, Any]) -> ToyObserver | None:
    return ToyObserver(values["toy"]) if values["toy"] else None


KIND = Kind((Option("toy", "a greeting", Part.OBSERVER, metavar="WORD"),), _settings)
'''

TOY_WRITER = '''
"""A toy report format: the crash points and their verdicts, one a line."""

from temporal_crashtest._report.report import Report


def toy_text(report: Report) -> bytes:
    return "".join(f"{c.crash_at} {c.matches}\\n" for c in report.cells).encode()
'''

TRIAL = """
import asyncio, json, sys
from pathlib import Path
import temporal_crashtest
from temporal_crashtest import ToyObserver
from temporal_crashtest._front.cli import finish, from_args, parse_args
from temporal_crashtest._observers.given import observers_for
from temporal_crashtest._report.report import Cell, Report
from temporal_crashtest.pytest_plugin import keywords

out = Path(sys.argv[1])
args = parse_args(["run", "--worker", "json:loads", "--workflow", "W", "--input", "1",
                   "--toy", "hello", "--toy-out", str(out / "verdicts.txt")])
target, observe, options = from_args(args)
observers = observers_for(observe, options.observers, out, 1.0)
cell = Cell(workflow_id="w", crash_at="after-effect:1", activity="a", matches=True,
            observed=None, diff=None, recovery_s=None, seconds=0.1)
report = Report(workflow="W", activities=["a"], reference={}, cells=[cell], seconds=1.0)
code = finish(args, report)
print(json.dumps({
    "package": temporal_crashtest.__file__,
    "observers": [repr(s) for s in options.observers],
    "state": asyncio.run(observers.state("w-1")),
    "keywords": sorted(k for k in keywords() if k.startswith("toy")),
    "written": (out / "verdicts.txt").read_text(),
    "code": code,
}))
"""


def _add(path: Path, after: str, line: str) -> None:
    """`line` written after the first line that starts with `after` (the recipe's one edit)."""
    text = path.read_text()
    at = text.index(after)
    end = text.index("\n", at) + 1
    path.write_text(text[:end] + line + text[end:])


def test_a_toy_observer_and_format_by_their_recipes_files_alone(tmp_path: Path) -> None:
    copy = tmp_path / "src" / "temporal_crashtest"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*.py")}
    # The observer's recipe: its module, its row of KINDS, its public name.
    (copy / "_observers" / "toy.py").write_text(TOY_OBSERVER)
    given = copy / "_observers" / "given.py"
    given.write_text(given.read_text().replace("(http.KIND,)", "(http.KIND, toy.KIND)"))
    given.write_text(
        given.read_text().replace("ObserverSettings, http", "ObserverSettings, http, toy")
    )
    public = copy / "__init__.py"  # lazily imported, named in __all__, typed
    _add(public, "_WHERE = {", '    "ToyObserver": "_observers.toy",\n')
    _add(public, "__all__ = [", '    "ToyObserver",\n')
    _add(public, "    from temporal_crashtest._observers.http import",
         "    from temporal_crashtest._observers.toy import ToyObserver\n")  # fmt: skip
    # The format's recipe: its row, and the module that writes it.
    (copy / "_report" / "toy_format.py").write_text(TOY_WRITER)
    formats = copy / "_report" / "formats.py"
    _add(formats, "FORMATS = (", '    Format("--toy-out", "the verdicts, one a line", toy_text),\n')
    _add(formats, "from temporal_crashtest._report.report import",
         "from temporal_crashtest._report.toy_format import toy_text\n")  # fmt: skip
    after = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*.py")}
    # Each file the trial touched is one its recipe names (a new module: the recipe's <name>).
    touched = [p.parent / "<name>.py" if p not in before else p for p in after]
    touched = [p for p, q in zip(touched, after, strict=True) if before.get(q) != after[q]]
    prefix = "crashtest/src/temporal_crashtest/"
    named = []
    for title, count in {"An observer": 3, "A report format": 2}.items():
        files = touched_by(title)
        assert len(files) == count, (title, files)  # "three files", "two files"
        named += [p.removeprefix(prefix) for p in files]
    assert sorted(map(str, touched)) == sorted(named), (touched, named)

    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(TRIAL), str(tmp_path)],
        env={"PYTHONPATH": str(copy.parent), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    assert said["package"].startswith(str(copy))
    assert said["observers"] == ["ToyObserver(greeting='hello')"]
    assert said["state"] == {"greeting": "hello", "run": "w-1"}
    assert said["keywords"] == ["toy", "toy_out"]
    assert said["written"] == "after-effect:1 True\n" and said["code"] == 0


def test_each_recipe_says_how_many_files_it_touches() -> None:
    said = {"two": 2, "three": 3, "four": 4, "five": 5}
    counted = {}
    for title, text in recipes().items():
        if (count := re.search(r"\b(two|three|four|five) files:", text)) is not None:
            counted[title] = (said[count[1]], len(touched_by(title)))
    assert len(counted) >= 5, counted  # observer, format, database library, moment, engine
    assert all(said == listed for said, listed in counted.values()), counted


def _rooms_imports() -> dict[str, set[str]]:
    """Each room of the package (a sub-package, or a module of its own) and the rooms it imports."""
    imports: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        room = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        found = imports.setdefault(room, set())
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                head, _, rest = name.partition(".")
                if head == "temporal_crashtest" and rest:
                    found.add(rest.split(".")[0])
        found.discard(room)
    return imports


def test_the_rooms_import_in_one_direction() -> None:
    """No circle between the package's rooms (so there is an order with every arrow down), and
    the plan, the histories and the crash points import nothing of the runs, the front, the
    report or the worker side (the data model stands below what runs it)."""
    imports = _rooms_imports()
    assert {"_front", "_run", "_plan", "_history", "_points", "_worker"} <= set(imports)
    order = list(graphlib.TopologicalSorter(imports).static_order())  # CycleError: a circle
    assert order.index("_points") < order.index("_plan") < order.index("_run")
    for low in ("_points", "_history", "_plan"):
        above = imports[low] & {"_front", "_run", "_report", "_worker", "_wire", "_observers"}
        assert not above, f"{low} imports {sorted(above)}"
