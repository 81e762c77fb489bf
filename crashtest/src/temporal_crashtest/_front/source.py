"""Python source read without running it: a module's file found on the import path as the
import system would find it (no module is imported, not even its package: a module whose import
starts a thread, reaches a network or changes a file does none of it here), parsed, and its
imports and definitions named, so that a name used in it can be followed to the definition it
stands for (`Sources.resolve`), and a decorator read as the dotted name it is (`qualified`).
Standard library only."""

from __future__ import annotations

import ast
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
_DEPTH = 12  # re-exports followed at most this deep (`from a import b` through packages)


@dataclass(frozen=True)
class Module:
    """One module's source: its import name, file and syntax tree, what it imports (a local name
    -> the module and the name in it; None: the module itself), and what it defines at its top
    level (in `with`, `try` and `if` blocks too), by name."""

    name: str
    path: Path
    tree: ast.Module
    imports: dict[str, tuple[str, str | None]]
    defs: dict[str, Definition]

    @property
    def package(self) -> str:
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]


@dataclass(frozen=True)
class Found:
    """What a name stands for: a definition in a module, or a module (`node` None)."""

    module: Module
    node: Definition | None = None


def find(name: str) -> Path | None:
    """The source file of module `name` on the import path (None: no such module, or no
    source: a built-in, an extension)."""
    parts = name.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    for entry in sys.path:
        base = Path(entry or ".").joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's top-level statements, those in its `with`, `try` and `if` blocks included."""
    for node in body:
        yield node
        if isinstance(node, ast.With | ast.AsyncWith | ast.If):
            yield from _statements(node.body)
            if isinstance(node, ast.If):
                yield from _statements(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _statements(block)
            for handler in node.handlers:
                yield from _statements(handler.body)


def _imported(module: str, node: ast.ImportFrom) -> str:
    """The absolute name of what `from ... import` reads from, in `module`'s package."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + 1] if node.level > 1 else base
    return ".".join([*base, *([node.module] if node.module else [])])


def parse(name: str, path: Path) -> Module | None:
    """Module `name` from its file (None: not Python this interpreter reads)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    imports: dict[str, tuple[str, str | None]] = {}
    defs: dict[str, Definition] = {}
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.partition(".")[0]
                    imports[top] = (top, None)
        elif isinstance(node, ast.ImportFrom):
            source = _imported(package, node)
            for alias in node.names:
                imports[alias.asname or alias.name] = (source, alias.name)
        elif isinstance(node, Definition):
            defs[node.name] = node
    return Module(name, path, tree, imports, defs)


@dataclass
class Sources:
    """The modules read so far, each once."""

    read: dict[str, Module | None] = field(default_factory=dict)

    def module(self, name: str) -> Module | None:
        if name not in self.read:
            path = find(name)
            self.read[name] = parse(name, path) if path is not None else None
        return self.read[name]

    def resolve(self, module: Module, name: str, depth: int = 0) -> Found | None:
        """What `name` stands for in `module`: a definition (there, or imported, through any
        re-exports), or a module (`import a.b as c`, `from a import b` where b is a module)."""
        if depth > _DEPTH:
            return None
        if name in module.defs:
            return Found(module, module.defs[name])
        where = module.imports.get(name)
        if where is None:
            return None
        source, attr = where
        if attr is None:
            target = self.module(source)
            return Found(target) if target is not None else None
        target = self.module(source)
        if target is not None and (found := self.resolve(target, attr, depth + 1)) is not None:
            return found
        submodule = self.module(f"{source}.{attr}")
        return Found(submodule) if submodule is not None else None

    def qualified(self, module: Module, expr: ast.expr) -> str:
        """A decorator's or a name's dotted name, its first part as imported: `@activity.defn`
        after `from temporalio import activity` is `temporalio.activity.defn` ("" if unknown)."""
        if isinstance(expr, ast.Call):
            return self.qualified(module, expr.func)
        if isinstance(expr, ast.Attribute):
            head = self.qualified(module, expr.value)
            return f"{head}.{expr.attr}" if head else ""
        if isinstance(expr, ast.Name):
            where = module.imports.get(expr.id)
            if where is None:
                return ""
            source, attr = where
            return f"{source}.{attr}" if attr else source
        return ""


def in_project(module: Module) -> bool:
    """Whether `module` is the user's own code (not the standard library's, nor an installed
    package's): its helper functions are read too."""
    installed = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    path = module.path.resolve()
    return not any(path.is_relative_to(Path(p).resolve()) for p in installed)


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    """The value of keyword argument `name` of `call` (None: not given)."""
    return next((k.value for k in call.keywords if k.arg == name), None)
