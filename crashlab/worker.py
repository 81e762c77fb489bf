"""`python -m crashlab.worker`: the chaos lab's Temporal worker, `python worker.py` with pauses.

STEP_PAUSE_MS (`LOW-HIGH` or `N` milliseconds, as for the journal) pauses a random time before
every activity and again after it returns (`crashlab.pauses`); every other setting is
`worker.py`'s.
"""

from __future__ import annotations

import worker
from crashlab.pauses import PauseInterceptor
from infra.cli import run_main
from infra.config import step_pause_seconds


async def main() -> int:
    pause = step_pause_seconds()
    return await worker.main([PauseInterceptor(*pause)] if pause is not None else [])


if __name__ == "__main__":
    run_main(main())
