"""`python -m temporal_crashtest.worker --worker MODULE:FACTORY --task-queue Q [--crash-at POINT]`:
a crash test's worker process, which a person can run by hand just the same (see
`_worker.process` for its options). Public: the command and its name."""

from __future__ import annotations

from temporal_crashtest._worker.process import main

if __name__ == "__main__":
    main()
