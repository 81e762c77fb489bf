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
from infra.logs import LogFormat, configure_logging

EXIT_EXPECTED_FAILURE = 2


def run_main(main: Coroutine[Any, Any, int]) -> NoReturn:
    """Run an async main; an AgentError prints `error: ...` on one line and exits 2."""
    try:
        fmt = configure_logging()  # LOG_FORMAT: text (default) or json
    except AgentError as err:
        main.close()
        print(f"error: {err}", file=sys.stderr)
        exit_now(EXIT_EXPECTED_FAILURE)
    try:
        code = asyncio.run(_stopped_by_sigterm(main))
    except AgentError as err:
        if fmt is LogFormat.JSON:  # the one line is a JSON object too
            logging.getLogger("error").error("%s", err)
        else:
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
