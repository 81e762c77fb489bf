"""Record crashtest/tests/histories/ from real crash tests (not a test): the notes app crashed at
after-effect:1 and after-checkpoint:1, fast-forwarded and with --real-timeouts, each cell's
history and the identities of the workers killed in it.

Run it again only when what a recovery looks like changes on purpose:
`python crashtest/tests/record_histories.py` with TEMPORAL_ADDRESS set (a tuned dev server).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

TESTS = Path(__file__).resolve().parent
HISTORIES = TESTS / "histories"
POINTS = "after-effect:1,after-checkpoint:1"
NOTES = ["--worker", "notes_app:build", "--workflow", "notes_app:NotesWorkflow",
         "--input", '["milk", "eggs"]', "--observe", "notes_app:notes_of",
         "--points", POINTS]  # fmt: skip


async def main() -> None:
    address = os.environ["TEMPORAL_ADDRESS"]
    client = await Client.connect(address)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS / "apps"), *sys.path])}
    HISTORIES.mkdir(exist_ok=True)
    for mode, extra in (("fast", []), ("real", ["--real-timeouts"])):
        with tempfile.TemporaryDirectory() as folder:
            report_path = Path(folder) / "report.json"
            await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "temporal_crashtest", "run", *NOTES, *extra,
                 "--json", str(report_path)],
                env={**env, "NOTES_DIR": folder}, cwd=folder, check=False,
            )  # fmt: skip
            report = json.loads(report_path.read_text())
        for cell in report["cells"]:
            history = await client.get_workflow_handle(cell["workflow_id"]).fetch_history()
            data = json.loads(history.to_json())
            name = f"notes-{mode}-{cell['crash_at'].replace(':', '-')}.json"
            record = {"waited_on": cell["waited_on"], "history": data}
            (HISTORIES / name).write_text(json.dumps(record, indent=1) + "\n")
            print(name, cell["waited_on"], EventType.Name(history.events[-1].event_type))


if __name__ == "__main__":
    asyncio.run(main())
