"""`python -m temporal_crashtest scaffold MODULE:CLASS`: write the hooks file for a workflow.

It reads the workflow's source as far as the code shows it: the names its class uses, and those
of the module's functions and classes it uses in turn (`_agent(...)` building a framework agent
from tools, say). A name that is an activity function, a method of an activity class, or another
workflow (a child, whose own code is read the same way) goes into the worker factory; an
activity named only by a string (`execute_activity("charge", ...)`) that no such name provides
is listed as a TODO. Signals and updates get a `drive` stub that says what to send. There is no
`observe` to write when the effects go through HTTP: the command it prints uses `--http`.

What it writes is a starting point, and it says so: an activity class whose constructor takes
arguments is built by a function that raises until it is written (the first crash test then
stops with that line, not with a wrong verdict)."""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import inspect
import keyword
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from temporalio import workflow
from temporalio.client import Plugin

from temporal_crashtest._errors import InputError
from temporal_crashtest._loading import load, workflow_type
from temporal_crashtest._outputs import check_output, write_output

_BY_STRING = {
    "execute_activity",
    "start_activity",
    "execute_local_activity",
    "start_local_activity",
}


@dataclass
class _Found:
    workflows: dict[str, type] = field(default_factory=dict)  # "module:Name" -> class
    functions: dict[str, Any] = field(default_factory=dict)  # "module:name" -> activity function
    classes: dict[str, tuple[type, list[str]]] = field(default_factory=dict)  # -> its methods
    by_string: set[str] = field(default_factory=set)  # activity types named by a string
    signals: list[str] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)  # client plugin classes the modules use

    def activity_names(self) -> set[str]:
        names = {_activity_name(f) for f in self.functions.values()}
        for cls, methods in self.classes.values():
            names |= {_activity_name(getattr(cls, m)) for m in methods}
        return names


def _activity_name(fn: Any) -> str:
    definition = getattr(fn, "__temporal_activity_definition", None)
    return str(getattr(definition, "name", None) or getattr(fn, "__name__", "?"))


def _is_activity(value: Any) -> bool:
    return getattr(value, "__temporal_activity_definition", None) is not None


def _is_workflow(value: Any) -> bool:
    return isinstance(value, type) and "__temporal_workflow_definition" in value.__dict__


def _where(value: Any) -> str:
    return f"{value.__module__}:{value.__qualname__}"


def _class_node(module: ModuleType, cls: type) -> tuple[ast.Module, ast.ClassDef] | None:
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return None
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return tree, node
    return None


def _read(cls: type, found: _Found, seen: set[str]) -> None:
    """Add what workflow `cls` uses (and its children, read the same way) to `found`."""
    if _where(cls) in seen:
        return
    seen.add(_where(cls))
    found.workflows[_where(cls)] = cls
    module = importlib.import_module(cls.__module__)
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, Plugin) and value is not Plugin:
            if value.__name__ not in found.plugins:
                found.plugins.append(value.__name__)
    located = _class_node(module, cls)
    if located is None:
        return
    tree, start = located
    defs = {
        n.name: n
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    todo: list[ast.AST] = [start]
    followed = {start.name}
    while todo:
        for node in ast.walk(todo.pop()):
            if isinstance(node, ast.Name):
                _use(module, node.id, None, found, seen)
                if node.id in defs and node.id not in followed:
                    followed.add(node.id)
                    if not _is_workflow(module.__dict__.get(node.id)):
                        todo.append(defs[node.id])
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                _use(module, node.value.id, node.attr, found, seen)
            elif isinstance(node, ast.Call):
                _by_string(node, found)


def _use(module: ModuleType, name: str, attr: str | None, found: _Found, seen: set[str]) -> None:
    value = module.__dict__.get(name)
    if value is None:
        return
    if attr is None:
        if _is_activity(value) and not isinstance(value, type):
            found.functions[_where(value)] = value
        elif _is_workflow(value):
            _read(value, found, seen)
        return
    if isinstance(value, type) and _is_activity(getattr(value, attr, None)):
        _, methods = found.classes.setdefault(_where(value), (value, []))
        if attr not in methods:
            methods.append(attr)


def _by_string(call: ast.Call, found: _Found) -> None:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in _BY_STRING and call.args:
        first = call.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.by_string.add(first.value)


def _handlers(cls: type, found: _Found) -> None:
    """The workflow's signals and updates, by name: from the SDK's definition of the class (not
    public; temporalio 1.35 to 2), else from what the decorators set."""
    try:
        from temporalio.workflow import _Definition
    except ImportError:
        definition = None
    else:
        definition = _Definition.from_class(cls)
    if definition is not None:
        found.signals += [n for n in definition.signals if n]
        found.updates += [n for n in definition.updates if n]
        return
    for name, value in inspect.getmembers(cls):
        if getattr(value, "__temporal_signal_definition", None) is not None:
            found.signals.append(name)
        if isinstance(value, workflow.UpdateMethodMultiParam):
            found.updates.append(name)


def _needs_arguments(cls: type) -> str | None:
    """The constructor's signature, if building `cls` takes arguments; None if `cls()` does."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return "(...)"
    required = [
        p
        for p in signature.parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    return str(signature) if required else None


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def scaffold(reference: str, out: Path, *, force: bool = False) -> str:
    """Write the hooks file for workflow `reference` (MODULE:CLASS) to `out`; the lines to say."""
    if ":" not in reference:
        raise InputError(f"scaffold takes MODULE:CLASS, not {reference!r}")
    workflow_type(reference)  # an InputError unless a @workflow.defn class
    cls = load(reference, "the workflow")
    _check_out(out, force=force)
    found = _Found()
    _read(cls, found, set())
    _handlers(cls, found)
    text = _render(reference, cls, found, out)
    ast.parse(text)  # what it writes is Python
    out.parent.mkdir(parents=True, exist_ok=True)
    check_output(out, "--out")  # not through a link, not onto a folder or a device
    write_output(out, text.encode(), "--out")
    missing = sorted(found.by_string - found.activity_names())
    lines = [
        f"wrote {out}: {len(found.workflows)} workflow(s), "
        f"{len(found.functions) + sum(len(m) for _, m in found.classes.values())} activity(ies)"
    ]
    if missing:
        lines.append(f"not found in the code, to add by hand: activities {', '.join(missing)}")
    built = [c.__name__ for c, _ in found.classes.values() if _needs_arguments(c)]
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
    return "\n".join(lines)


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


def _render(reference: str, cls: type, found: _Found, out: Path) -> str:
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
    activities = sorted(f.__name__ for f in found.functions.values())
    builders: list[str] = []
    for owner, methods in found.classes.values():
        var = _snake(owner.__name__)
        signature = _needs_arguments(owner)
        if signature is None:
            body.append(f"    {var} = {owner.__name__}()")
        else:
            body.append(f"    {var} = _{var}()")
            todo = _docstring_text(
                f"TODO: build it as your worker does: {owner.__name__}{signature}."
            )
            error = repr(f"{out.name}: write how to build {owner.__name__}")
            builders.append(
                textwrap.dedent(f'''
                def _{var}() -> {owner.__name__}:
                    """{todo}"""
                    raise NotImplementedError({error})
                ''')
            )
        activities += [f"{var}.{m}" for m in methods]
    return body, activities, builders


def _head(reference: str, found: _Found, out: Path, waits: bool) -> str:
    """The module's docstring (the command to run) and its imports."""
    imports: dict[str, set[str]] = {}
    for value in [*found.workflows.values(), *found.functions.values()]:
        imports.setdefault(value.__module__, set()).add(value.__name__)
    for owner, _ in found.classes.values():
        imports.setdefault(owner.__module__, set()).add(owner.__name__)
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
    workflows = [w.__name__ for w in found.workflows.values()]
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
