"""`command_worker.py` run as a worker command that leaves something behind: with ESCAPE=1 it
first starts a process in a session of its own (as a daemon would: `setsid`), which sleeps; run
through `sh -c "... & wait"` its worker is not the command's own process either. Each process
it starts carries NOTES_DIR, by which a test finds what is left."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from command_worker import main

if __name__ == "__main__":
    if os.environ.get("ESCAPE"):
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
        )
    asyncio.run(main())
