"""`python -m temporal_crashtest scaffold MODULE:CLASS`: write the hooks file for a workflow.

It reads the workflow's source, as far as the code shows it, without importing any of it (a
module whose import starts a thread or reaches a network does none of that here; `_source`):
the names its class uses, and those of the functions and classes they stand for in turn — in
its module and in the project's other modules (a helper module's `handle_tool(...)`), not in
installed packages. A name that is an activity function, a method of an activity class, or
another workflow (a child, whose own code is read the same way) goes into the worker factory;
an activity named only by a string (`execute_activity("charge", ...)`) that no such name
provides is listed as a TODO; one named by anything else (`execute_activity(current_tool, ...)`:
a dynamic activity) and every `task_queue=` given are listed with their file and line, as what
the hooks do not cover. Signals and updates get a `drive` stub that says what to send. There is
no `observe` to write when the effects go through HTTP: the command it prints uses `--http`.

What it writes is a starting point, and it says so: an activity class whose constructor takes
arguments is built by a function that raises until it is written (the first crash test then
stops with that line, not with a wrong verdict)."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import keyword
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from temporal_crashtest._errors import InputError
from temporal_crashtest._files import check_output, write_output
from temporal_crashtest._front.source import Definition, Found, Module, Sources, in_project
from temporal_crashtest._front.source import keyword as keyword_argument

# The calls that schedule an activity, whose first argument names it.
_BY_STRING = {
    "execute_activity",
    "start_activity",
    "execute_local_activity",
    "start_local_activity",
}
# The calls that may name a task queue (activities and child workflows).
_QUEUED = _BY_STRING | {
    "execute_activity_method",
    "start_activity_method",
    "execute_activity_class",
    "start_activity_class",
    "execute_child_workflow",
    "start_child_workflow",
}
ACTIVITY, WORKFLOW = "temporalio.activity.defn", "temporalio.workflow.defn"
SIGNAL, UPDATE = "temporalio.workflow.signal", "temporalio.workflow.update"


@dataclass(frozen=True)
class _Named:
    """A definition the hooks import: its module and its name there."""

    module: str
    name: str


@dataclass(frozen=True)
class _Place:
    """Where something is in the user's code, and what: its file, its line, its text."""

    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.text}"


@dataclass
class _Found:
    workflows: dict[_Named, ast.ClassDef] = field(default_factory=dict)
    functions: dict[_Named, str] = field(default_factory=dict)  # -> its activity name
    classes: dict[_Named, tuple[ast.ClassDef, list[tuple[str, str]]]] = field(
        default_factory=dict
    )  # -> its node and its activity methods used (method, activity name)
    by_string: set[str] = field(default_factory=set)  # activity types named by a string
    dynamic: list[_Place] = field(default_factory=list)  # activities named by anything else
    queues: list[_Place] = field(default_factory=list)  # task queues the code names
    signals: list[str] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)  # client plugin classes the modules use

    def activity_names(self) -> set[str]:
        names = set(self.functions.values())
        for _, methods in self.classes.values():
            names |= {activity for _, activity in methods}
        return names


class _Reader:
    """Reads a workflow's code, and what it uses, into a `_Found`."""

    def __init__(self, sources: Sources, found: _Found) -> None:
        self.sources, self.found = sources, found
        self.followed: set[tuple[str, str]] = set()  # (module, definition) walked already

    def decorated(self, module: Module, node: Definition, *names: str) -> ast.expr | None:
        """The decorator of `node` that is one of `names` (as imported), if any."""
        for decorator in node.decorator_list:
            if self.sources.qualified(module, decorator) in names:
                return decorator
        return None

    def activity_name(self, module: Module, node: Definition) -> str | None:
        """`node`'s activity type, if an activity: `@activity.defn(name=...)`, else its name."""
        decorator = self.decorated(module, node, ACTIVITY)
        if decorator is None:
            return None
        given = keyword_argument(decorator, "name") if isinstance(decorator, ast.Call) else None
        if isinstance(given, ast.Constant) and isinstance(given.value, str):
            return given.value
        return node.name

    def workflow(self, module: Module, node: ast.ClassDef) -> None:
        """Read workflow class `node` (and the children it starts) into the found."""
        key = _Named(module.name, node.name)
        if key in self.found.workflows:
            return
        self.found.workflows[key] = node
        for name, imported in module.imports.items():
            if imported[1] is not None and name.endswith("Plugin"):
                if name not in self.found.plugins:
                    self.found.plugins.append(name)
        self.walk(module, node)

    def walk(self, module: Module, start: ast.AST) -> None:
        """Every name `start` uses, followed (see the module's docstring)."""
        for node in ast.walk(start):
            if isinstance(node, ast.Name):
                self.use(module, self.sources.resolve(module, node.id), None)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                self.use(module, self.sources.resolve(module, node.value.id), node.attr)
            elif isinstance(node, ast.Call):
                self.call(module, node)

    def use(self, here: Module, found: Found | None, attr: str | None) -> None:
        if found is None:
            return
        if found.node is None:  # a module: what `attr` stands for in it
            if attr is not None:
                self.use(here, self.sources.resolve(found.module, attr), None)
            return
        module, node = found.module, found.node
        if attr is not None:
            if isinstance(node, ast.ClassDef):
                self.method(module, node, attr)
            return
        if isinstance(node, ast.ClassDef) and self.decorated(module, node, WORKFLOW):
            self.workflow(module, node)
        elif (name := self.activity_name(module, node)) is not None:
            if not isinstance(node, ast.ClassDef):
                self.found.functions[_Named(module.name, node.name)] = name
        elif in_project(module) and (module.name, node.name) not in self.followed:
            self.followed.add((module.name, node.name))  # a helper of the user's: read it too
            self.walk(module, node)

    def method(self, module: Module, cls: ast.ClassDef, attr: str) -> None:
        """`Class.attr`: an activity method of an activity class, used."""
        for item in cls.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == attr:
                name = self.activity_name(module, item)
                if name is not None:
                    _, methods = self.found.classes.setdefault(
                        _Named(module.name, cls.name), (cls, [])
                    )
                    if (attr, name) not in methods:
                        methods.append((attr, name))

    def call(self, module: Module, call: ast.Call) -> None:
        """A call that schedules an activity or a child: the activity it names by a string, or
        by anything else (listed), and the task queue it names (listed)."""
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in _QUEUED:
            return
        if name in _BY_STRING and call.args:
            first = call.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                self.found.by_string.add(first.value)
            elif isinstance(first, ast.Name | ast.Attribute | ast.Subscript | ast.Call):
                found = (
                    self.sources.resolve(module, first.id) if isinstance(first, ast.Name) else None
                )
                if found is None or found.node is None:
                    self.found.dynamic.append(self.place(module, first))
        queue = keyword_argument(call, "task_queue")
        if queue is not None and not (isinstance(queue, ast.Constant) and queue.value is None):
            self.found.queues.append(self.place(module, queue))

    def place(self, module: Module, node: ast.expr) -> _Place:
        try:
            path = str(module.path.resolve().relative_to(Path.cwd()))
        except ValueError:
            path = str(module.path)
        return _Place(path, node.lineno, ast.unparse(node)[:80])


def _handlers(reader: _Reader, module: Module, cls: ast.ClassDef) -> None:
    """The workflow's signals and updates, by name (a decorator's `name=`, else the method's)."""
    for item in cls.body:
        if not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for kind, into in ((SIGNAL, reader.found.signals), (UPDATE, reader.found.updates)):
            decorator = reader.decorated(module, item, kind)
            if decorator is None:
                continue
            given = keyword_argument(decorator, "name") if isinstance(decorator, ast.Call) else None
            named = given.value if isinstance(given, ast.Constant) else None
            into.append(str(named or item.name))


def _needs_arguments(cls: ast.ClassDef) -> str | None:
    """The constructor's parameters, if building `cls` takes arguments; None if `cls()` does."""
    init = next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
    )
    if init is None:
        return None
    args = init.args
    positional = [*args.posonlyargs, *args.args][1:]  # not `self`
    required = len(positional) - len(args.defaults)
    required += sum(1 for d in args.kw_defaults if d is None)
    if required <= 0:
        return None
    shown = ast.arguments(
        posonlyargs=[],
        args=positional,
        vararg=args.vararg,
        kwonlyargs=args.kwonlyargs,
        kw_defaults=args.kw_defaults,
        kwarg=args.kwarg,
        defaults=args.defaults,
    )
    return f"({ast.unparse(shown)})"


def _workflow_of(reference: str, sources: Sources) -> tuple[Module, ast.ClassDef]:
    """The workflow class `reference` (MODULE:CLASS) names, read from its source; InputError
    for a module not found, a class not in it, or one that is not a workflow."""
    module_name, _, class_name = reference.partition(":")
    module = sources.module(module_name)
    if module is None:
        raise InputError(
            f"scaffold {reference}: no module {module_name!r} with Python source on the import "
            f"path (the working directory is {Path.cwd()})"
        )
    found = sources.resolve(module, class_name)
    if found is None or not isinstance(found.node, ast.ClassDef):
        raise InputError(f"scaffold {reference}: {module_name} has no class {class_name!r}")
    reader = _Reader(sources, _Found())
    if reader.decorated(found.module, found.node, WORKFLOW) is None:
        raise InputError(f"scaffold {reference}: {class_name} is not a @workflow.defn class")
    return found.module, found.node


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def scaffold(reference: str, out: Path, *, force: bool = False) -> str:
    """Write the hooks file for workflow `reference` (MODULE:CLASS) to `out`; the lines to say."""
    if ":" not in reference:
        raise InputError(f"scaffold takes MODULE:CLASS, not {reference!r}")
    sources = Sources()
    module, cls = _workflow_of(reference, sources)
    _check_out(out, force=force)
    reader = _Reader(sources, _Found())
    reader.workflow(module, cls)
    _handlers(reader, module, cls)
    found = reader.found
    text = _render(reference, found, out)
    ast.parse(text)  # what it writes is Python
    out.parent.mkdir(parents=True, exist_ok=True)
    check_output(out, "--out")  # not through a link, not onto a folder or a device
    write_output(out, text.encode(), "--out")
    return "\n".join(_said(reference, found, out))


def _said(reference: str, found: _Found, out: Path) -> list[str]:
    """What scaffold says: what it wrote, what is left to write, what its hooks do not cover
    (each with its file and line), and the command to run."""
    missing = sorted(found.by_string - found.activity_names())
    lines = [
        f"wrote {out}: {len(found.workflows)} workflow(s), "
        f"{len(found.functions) + sum(len(m) for _, m in found.classes.values())} activity(ies)"
    ]
    if missing:
        lines.append(f"not found in the code, to add by hand: activities {', '.join(missing)}")
    for place in found.dynamic:
        lines.append(
            f"not covered: an activity named at run time, {place} (a dynamic activity: register "
            "what it can name, or an activity with `@activity.defn(dynamic=True)`)"
        )
    for place in found.queues:
        lines.append(
            f"not covered: a task queue, {place} (the hooks poll the queue crashtest gives; "
            'serve this one too, made from it: f"{task_queue}-<name>")'
        )
    built = [node.name for node, _ in found.classes.values() if _needs_arguments(node)]
    if built:
        lines.append(f"to write: how to build {', '.join(built)} (it raises until then)")
    if found.signals or found.updates:
        lines.append("to write: the drive (the run waits for signals or updates)")
    if found.plugins:
        lines.append(
            f"to give: --plugin MODULE:NAME, a function returning the {', '.join(found.plugins)} "
            "your worker runs the workflow with"
        )
    lines.append(
        "run: python -m temporal_crashtest run " + " ".join(_command(reference, found, out))
    )
    return lines


def _check_out(out: Path, *, force: bool) -> None:
    """InputError for a hooks file that cannot be imported by the name the command gives, or
    would hide another module (`json.py` shadows the standard library's for the whole run)."""
    if out.suffix != ".py":
        raise InputError(f"the hooks file is a Python module: {out} does not end in .py")
    if not out.stem.isidentifier() or keyword.iskeyword(out.stem):
        raise InputError(f"--out {out}: {out.stem!r} is not a module name (letters, digits, _)")
    if out.is_symlink():
        raise InputError(f"--out {out} is a symbolic link: name the file itself")
    if out.exists() and not force:
        raise InputError(f"{out} exists: give another --out, or --force to replace it")
    taken = out.stem in sys.stdlib_module_names or out.stem in sys.builtin_module_names
    if not taken and not out.exists():
        with contextlib.suppress(ImportError, ValueError):
            taken = importlib.util.find_spec(out.stem) is not None
    if taken:
        raise InputError(
            f"--out {out}: a module named {out.stem!r} exists already, and the hooks would hide "
            f"it wherever they are imported: name it e.g. {out.stem}_crash_hooks.py"
        )


def _docstring_text(text: str) -> str:
    """`text` as it may stand inside a triple-quoted docstring: a backslash or a `\"\"\"` of
    the user's (a constructor's default, a path) cannot end it early."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _module_name(out: Path) -> str:
    """The hooks file's module name, imported from the working directory (outside it: its
    name, importable with its folder on PYTHONPATH)."""
    try:
        relative = out.resolve().relative_to(Path.cwd())
    except ValueError:
        return out.stem
    parts = relative.with_suffix("").parts
    return ".".join(parts) if all(p.isidentifier() for p in parts) else out.stem


def _command(reference: str, found: _Found, out: Path) -> list[str]:
    """The crash test's arguments after `python -m temporal_crashtest run`, flag by flag."""
    hooks = _module_name(out)
    cmd = [f"--worker {hooks}:build_worker", f"--workflow {reference}"]
    cmd += ["--input '<JSON, or @FILE>'"]
    cmd += ["--http"]
    if found.signals or found.updates:
        cmd += [f"--drive {hooks}:drive"]
    return cmd


def _render(reference: str, found: _Found, out: Path) -> str:
    """The hooks file: its docstring and imports, a builder per activity class that takes
    arguments, the worker factory, and the drive when the run waits for messages."""
    waits = bool(found.signals or found.updates)
    body, activities, builders = _activity_objects(found, out)
    parts = [
        _head(reference, found, out, waits),
        *builders,
        _factory(found, body, activities),
    ]
    if waits:
        parts.append(_drive(found, out))
    return "\n".join(parts).rstrip() + "\n"


def _activity_objects(found: _Found, out: Path) -> tuple[list[str], list[str], list[str]]:
    """The factory's lines that build the activity classes, the activities it registers, and
    a builder (raising until written) per class whose constructor takes arguments."""
    body: list[str] = []
    activities = sorted(named.name for named in found.functions)
    builders: list[str] = []
    for owner, (node, methods) in found.classes.items():
        var = _snake(owner.name)
        signature = _needs_arguments(node)
        if signature is None:
            body.append(f"    {var} = {owner.name}()")
        else:
            body.append(f"    {var} = _{var}()")
            todo = _docstring_text(f"TODO: build it as your worker does: {owner.name}{signature}.")
            error = repr(f"{out.name}: write how to build {owner.name}")
            builders.append(
                textwrap.dedent(f'''
                def _{var}() -> {owner.name}:
                    """{todo}"""
                    raise NotImplementedError({error})
                ''')
            )
        activities += [f"{var}.{method}" for method, _ in methods]
    return body, activities, builders


def _head(reference: str, found: _Found, out: Path, waits: bool) -> str:
    """The module's docstring (the command to run) and its imports."""
    imports: dict[str, set[str]] = {}
    for named in [*found.workflows, *found.functions, *found.classes]:
        imports.setdefault(named.module, set()).add(named.name)
    run = " \\\\\n        ".join(_docstring_text(c) for c in _command(reference, found, out))
    plugin = (
        [f"(adding --plugin MODULE:NAME, a function returning the {', '.join(found.plugins)})"]
        if found.plugins
        else []
    )
    lines = [
        f'"""Crash-test hooks for {reference}, written by',
        "`python -m temporal_crashtest scaffold` from the workflow's code as far as it shows",
        "it: review each TODO, then run",
        "",
        f"    python -m temporal_crashtest run {run}",
        "",
        *plugin,
        "`--http` records the effectful HTTP requests your activities send (their effects, and",
        "model calls as paid calls). Effects taken another way (rows in your database) need an",
        "`observe(workflow_id) -> JSON` here too, given with `--observe`: see the guide.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from datetime import timedelta",
        *(["from typing import Any"] if waits else []),
        "",
        "from temporalio.client import Client" + (", WorkflowHandle" if waits else ""),
        "from temporalio.worker import Worker\n",
        *(f"from {m} import {', '.join(sorted(imports[m]))}" for m in sorted(imports)),
        "",
    ]
    return "\n".join(lines)


def _factory(found: _Found, body: list[str], activities: list[str]) -> str:
    """`build_worker`: the workflows and activities found, on the crash test's client."""
    workflows = [named.name for named in found.workflows]
    missing = sorted(found.by_string - found.activity_names())
    todo = ""
    if missing:
        todo = f"    # TODO: activities named by a string, not found: {', '.join(missing)}\n"
    factory = [
        "",
        "async def build_worker(client: Client, task_queue: str) -> Worker:",
        '    """A worker for the workflow, the child workflows it starts and the activities they',
        '    run, on the client and task queue the crash test gives."""',
        *body,
        "    return Worker(",
        "        client,",
        "        task_queue=task_queue,",
        f"        workflows=[{', '.join(workflows)}],",
        f"{todo}        activities=[{', '.join(activities)}],",
        "        # a killed worker's sticky queue is given up after 1 s, not 10 s",
        "        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),",
        "    )",
    ]
    return "\n".join(factory)


def _drive(found: _Found, out: Path) -> str:
    """`drive`, to be written: what the run waits for."""
    sends = [f"signal {s}" for s in found.signals] + [f"update {u}" for u in found.updates]
    return textwrap.dedent(f'''

        async def drive(handle: WorkflowHandle[Any, Any]) -> None:
            """Send what the run waits for ({", ".join(sends)}), in the order a user
            would: `temporal_crashtest.send_signal(handle, name, arg)`,
            `send_update(...)` and `wait_until(handle, query, test)` are retried while no
            worker is up (see examples/shapes/conversation.py)."""
            raise NotImplementedError({f"{out.name}: write the drive"!r})
        ''').rstrip()
