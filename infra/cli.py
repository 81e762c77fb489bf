"""The one place command-line entry points turn expected failures into one line and an exit code."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import logging
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn

from infra.errors import AgentError
from infra.logs import LogFormat, configure_logging
from infra.redaction import redact

EXIT_EXPECTED_FAILURE = 2


def visible(text: str) -> str:
    """`text` with every character a terminal would act on instead of showing (escape codes,
    carriage returns, bidirectional overrides, ...) written as its escape (`\\x1b`), so that text
    from a model or a server prints as what it is, on one line; one that begins with `::` or
    holds `##[` (GitHub Actions' workflow commands) defused."""
    out = "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text
    )
    if out.startswith("::"):
        out = "\\x3a" + out[1:]
    return out.replace("##[", "#\\x23[")


class ArgumentParser(argparse.ArgumentParser):
    """argparse's, whose error line shows the arguments it names as text (`visible`): an
    argument it does not know is the user's, and may hold an escape code."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_EXPECTED_FAILURE, f"{self.prog}: error: {visible(message)}\n")


def exit_now(code: int) -> NoReturn:
    """Exit without CPython's interpreter teardown.

    The Temporal SDK's Rust threads can take the GIL while the interpreter finalizes, which
    aborts the process ("Fatal Python error: PyGILState_Release ... finalizing", SIGABRT;
    temporalio/sdk-python issue #300). So: run the exit handlers, flush, and `os._exit`.
    """
    # `_run_exitfuncs` is CPython's (3.11-3.13 here); without it the handlers are skipped.
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is not None:
        run_exit_handlers()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_main(main: Coroutine[Any, Any, int]) -> NoReturn:
    """Run an async main; an AgentError prints `error: ...` on one line and exits 2."""
    try:
        fmt = configure_logging()  # LOG_FORMAT: text (default) or json
    except AgentError as err:
        main.close()
        print(f"error: {visible(redact(str(err)))}", file=sys.stderr)
        exit_now(EXIT_EXPECTED_FAILURE)
    try:
        code = asyncio.run(_stopped_by_sigterm(main))
    except AgentError as err:
        if fmt is LogFormat.JSON:  # the one line is a JSON object too (its handler redacts)
            logging.getLogger("error").error("%s", err)
        else:
            print(f"error: {visible(redact(str(err)))}", file=sys.stderr)
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
