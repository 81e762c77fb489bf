"""`pip install` of this folder into a fresh virtual environment that holds nothing of any
project, then a crash test of a workflow written outside any repository: what a new user does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

from conftest import APPS

DISTRIBUTION = Path(__file__).resolve().parent.parent
INSTALL_TIMEOUT_S = 300


def test_installed_from_the_folder_it_catches_an_unkeyed_effect(
    temporal_address: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(DISTRIBUTION)],
        env=clean, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(APPS / "notes_app.py", app)
    # Nothing of the repository is importable there: only the tool and what it depends on.
    probe = subprocess.run(
        [str(python), "-c", "import temporal_crashtest, importlib.util as u; "
         "print(u.find_spec('infra'), u.find_spec('worker'), temporal_crashtest.__version__)"],
        env=clean, cwd=app, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert probe.stdout.split()[:2] == ["None", "None"], probe.stdout + probe.stderr

    out = tmp_path / "report.json"
    done = subprocess.run(
        [str(python), "-m", "temporal_crashtest", "run", "--worker", "notes_app:build",
         "--workflow", "notes_app:NotesWorkflow", "--input", '["milk", "eggs"]',
         "--observe", "notes_app:notes_of", "--json", str(out)],
        env={**clean, "TEMPORAL_ADDRESS": temporal_address, "NOTES_DIR": str(tmp_path)},
        cwd=app, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert {c["crash_at"] for c in report["cells"] if not c["matches"]} == {
        "after-effect:1", "after-effect:2",
    }  # fmt: skip
    print(f"fresh venv, pip install, crash test: {time.monotonic() - started:.1f} s",
          file=sys.stderr)  # fmt: skip
