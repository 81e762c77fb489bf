"""`python -m tests.programs.start_postgres [--die]`: start the embedded Postgres (DATA_DIR) and
print its URL, as any command does on first use; with --die, then SIGKILL this process, as a
crash would, before it could stop anything."""

from __future__ import annotations

import os
import signal
import sys

from infra.db import ensure_database_url

if __name__ == "__main__":
    print(ensure_database_url(), flush=True)
    if "--die" in sys.argv[1:]:
        os.kill(os.getpid(), signal.SIGKILL)
