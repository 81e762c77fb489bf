"""How crashtest's commands end: exit codes, and an exit the Temporal SDK cannot abort."""

from __future__ import annotations

import atexit
import logging
import os
import sys
from typing import NoReturn

EXIT_ALL_MATCH = 0
EXIT_SOME_DIFFER = 1
EXIT_BAD_INPUT = 2


def exit_now(code: int) -> NoReturn:
    """Exit without CPython's interpreter teardown.

    The Temporal SDK's Rust threads can take the GIL while the interpreter finalizes, which
    aborts the process ("Fatal Python error: PyGILState_Release ... finalizing", SIGABRT;
    temporalio/sdk-python issue #300). So: run the exit handlers, flush, and `os._exit`.
    """
    # `_run_exitfuncs` is CPython's (3.11-3.13 tested); without it the handlers are skipped.
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is not None:
        run_exit_handlers()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
