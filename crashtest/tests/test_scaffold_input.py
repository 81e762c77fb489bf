"""What `scaffold` writes, and where, whatever the code and the paths it is given: a constructor's
default that would end a docstring stays text, the file is never written through a link, and
a hooks module never hides another one (`--out json.py`)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from conftest import APPS
from temporal_crashtest._errors import InputError
from temporal_crashtest._front.scaffold import scaffold

sys.path.insert(0, str(APPS))
WORKFLOW = "hostile_defaults_app:HostileDefaults"


def test_a_default_that_ends_a_docstring_stays_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = tmp_path / "PWNED"
    monkeypatch.setenv("HOSTILE_MARK", str(mark))
    out = tmp_path / "hostile_hooks.py"
    scaffold(WORKFLOW, out)
    spec = importlib.util.spec_from_file_location("hostile_hooks", out)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(NotImplementedError, match="write how to build Tools"):
        module._tools()
    assert not mark.exists(), "the default's code ran"
    assert '"""; import os' in (module._tools.__doc__ or "")


def test_out_is_never_a_link_nor_another_modules_name(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("kept")
    link = tmp_path / "linked_hooks.py"
    os.symlink(target, link)
    for out, said in [
        (link, "is a symbolic link"),
        (tmp_path / "json.py", "a module named 'json' exists already"),
        (tmp_path / "temporalio.py", "a module named 'temporalio' exists already"),
        (tmp_path / "my-hooks.py", "is not a module name"),
    ]:
        with pytest.raises(InputError, match=said):
            scaffold(WORKFLOW, out, force=True)
    assert target.read_text() == "kept"


def test_the_code_is_read_not_run_and_what_is_not_covered_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """temporal-community/temporal-ai-agent, tried as a new user would: scaffold found the
    workflow and its activities, and said nothing of the tool its helper runs as an activity
    named at run time (where the invoice is made) nor of the second task queue; and it imported
    the workflow's module to read it (one with import-time effects ran them). Now the source is
    read, helpers in the project's other modules too, and each such call and queue is named with
    its line."""
    mark = tmp_path / "IMPORTED"
    monkeypatch.setenv("SCAFFOLD_IMPORT_MARK", str(mark))
    monkeypatch.chdir(APPS)
    said = scaffold("tool_agent_app:ToolAgent", tmp_path / "agent_hooks.py").splitlines()
    assert not mark.exists(), "scaffold ran the module's code"
    assert "tool_agent_app" not in sys.modules and "tool_agent_helpers" not in sys.modules
    assert said[0].endswith("1 workflow(s), 2 activity(ies)"), said
    assert "not covered: an activity named at run time, tool_agent_helpers.py:17 tool" in said[1]
    assert "not covered: a task queue, tool_agent_helpers.py:17 queue" in said[2]
    assert "to write: the drive" in said[3]
    hooks = (tmp_path / "agent_hooks.py").read_text()
    assert "activities=[planner, checks.validate]" in hooks, hooks
    assert "from tool_agent_app import Checks, ToolAgent, planner" in hooks, hooks
