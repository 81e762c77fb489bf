"""Workflow task failures a history does not show, told by the worker that met them.

Temporal writes a workflow task's failure into the history only when it starts a streak, and the
SDK's core does not even report a failure again on a later attempt: once a task has timed out (a
killed worker held it, or it outran a short timeout), its failures are written nowhere, and the
run only looks slow. The worker's Python SDK still logs each one: a nondeterminism error as the
eviction of the run (at DEBUG, with the error), a deadlock or an exception in workflow code as a
failed activation (at ERROR). `report_task_failures` takes those records in a crash test's worker
and sends each failure on its status channel (`WorkerStatus.task_failures` keeps the latest per
run); every record the logger would have passed on before still reaches its handlers.
"""

from __future__ import annotations

import logging
import re
import time

from temporal_crashtest._worker.status import StatusWriter

DEADLOCK = "[TMPRL1101]"  # the SDK's "Potential deadlock detected"

SDK_WORKFLOW_LOGGER = "temporalio.worker._workflow"
EVICTING = "Evicting workflow with run ID"  # (run id, the eviction's message)
FAILED_ACTIVATION = "Failed handling activation on workflow with run ID"  # (run id,), exc_info
FAILURE_MARKS = ("[TMPRL1100]", "[TMPRL1101]", "Nondeterminism", "deadlock")
_INNER = re.compile(r'message: "((?:[^"\\]|\\.)*)"')
MESSAGE_CHARS = 1500  # a status line stays one atomic write to its FIFO (under PIPE_BUF)


class FailureReporter(logging.Handler):
    """Sends `{"event": "task_failed", "run_id": ..., "message": ..., "at": ...}` for each
    workflow task failure the SDK logs, and passes on what the logger passed on before (records
    at `passed_level` or above) to the handlers of its ancestors."""

    def __init__(self, status: StatusWriter, passed_level: int) -> None:
        super().__init__(level=logging.DEBUG)
        self.status = status
        self.passed_level = passed_level

    def emit(self, record: logging.LogRecord) -> None:
        try:
            failure = _failure(record)
            if failure is not None:
                run_id, message = failure
                self.status.send(
                    "task_failed", run_id=run_id, message=message[:MESSAGE_CHARS], at=time.time()
                )
            if record.levelno >= self.passed_level:
                logging.getLogger(SDK_WORKFLOW_LOGGER).parent.handle(record)  # type: ignore[union-attr]
        except Exception:  # a log line must never break the worker
            self.handleError(record)


def _failure(record: logging.LogRecord) -> tuple[str, str] | None:
    """The run id and the failure a record tells of, if it tells of one."""
    template, args = record.msg, record.args
    if not isinstance(template, str) or not isinstance(args, tuple) or not args:
        return None
    if template.startswith(EVICTING) and len(args) == 2:
        message = str(args[1])
        if not any(m in message for m in FAILURE_MARKS):
            return None  # an eviction of a run that did not fail (a full cache, its end)
        return str(args[0]), core_failure(message)
    if template.startswith(FAILED_ACTIVATION) and record.exc_info and record.exc_info[1]:
        error = record.exc_info[1]
        return str(args[0]), f"{type(error).__name__}: {error}"
    return None


def core_failure(text: str) -> str:
    """The message inside the core's rendering of a failure (`Workflow activation completion
    failed: Failure { failure: Some(Failure { message: "[TMPRL1100] ...", ... }`), else `text`."""
    inner = _INNER.search(text)
    return inner.group(1).replace('\\"', '"') if inner else text


def report_task_failures(status: StatusWriter) -> None:
    """Take the SDK workflow logger's records (DEBUG included, for evictions) through a
    FailureReporter, which passes on the rest as the logger did."""
    sdk = logging.getLogger(SDK_WORKFLOW_LOGGER)
    sdk.addHandler(FailureReporter(status, passed_level=sdk.getEffectiveLevel()))
    sdk.setLevel(logging.DEBUG)
    sdk.propagate = False


def with_likely_cause(message: str) -> str:
    """A failure's first line, and what usually causes it when a worker cannot decode what it was
    sent or cannot load a framework's workflow (the framework's plugin, or data converter, that
    the crash test's clients do not have)."""
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    lowered = first.lower()
    if "decod" in lowered or "deserializ" in lowered or "failed validating workflow" in lowered:
        first += " (a --plugin or --data-converter missing?)"
    elif "from inside a workflow" in lowered or "restricted" in lowered or "sandbox" in lowered:
        # An agent framework's workflows need its plugin, which also tells the sandbox what to
        # pass through: without it the sandbox refuses the framework's imports.
        first += " (a --plugin missing? an agent framework's plugin configures the sandbox)"
    return first
