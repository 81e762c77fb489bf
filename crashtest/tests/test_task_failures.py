"""The worker's report of workflow task failures no history shows (`_worker.task_failures`), in
process: the SDK's log records as it makes them, read into (run id, failure), and every record the
SDK's logger passed on before still passed on. And the failures a history shows that count against
the code (`code_failures`): not those the server makes."""

from __future__ import annotations

import logging

import pytest
from temporal_crashtest._run.recovery.polling import code_failures
from temporal_crashtest._worker.status import StatusWriter
from temporal_crashtest._worker.task_failures import (
    EVICTING,
    FAILED_ACTIVATION,
    SDK_WORKFLOW_LOGGER,
    FailureReporter,
    _failure,
)
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent, WorkflowTaskFailedEventAttributes
from temporalio.client import WorkflowHistory

NDE = (
    "Workflow activation completion failed: Failure { failure: Some(Failure { message: "
    '"[TMPRL1100] Nondeterminism error: Activity type of scheduled event \\"b\\" does not match", '
    'source: "", stack_trace: "" }) }'
)


def record(
    level: int, template: str, *args: object, error: Exception | None = None
) -> logging.LogRecord:
    exc_info = (type(error), error, None) if error else None
    return logging.LogRecord(SDK_WORKFLOW_LOGGER, level, __file__, 1, template, args, exc_info)


def test_an_eviction_for_nondeterminism_is_a_failure_with_its_message() -> None:
    found = _failure(record(logging.DEBUG, EVICTING + " %s, message: %s", "run-1", NDE))
    assert found == (
        "run-1",
        '[TMPRL1100] Nondeterminism error: Activity type of scheduled event "b" does not match',
    )


def test_an_eviction_of_a_run_that_did_not_fail_is_none() -> None:
    done = "Workflow completed"
    assert _failure(record(logging.DEBUG, EVICTING + " %s, message: %s", "run-1", done)) is None


def test_a_failed_activation_is_a_failure_with_its_exception() -> None:
    error = RuntimeError("[TMPRL1101] Potential deadlock detected: workflow didn't yield")
    found = _failure(record(logging.ERROR, FAILED_ACTIVATION + " %s", "run-2", error=error))
    assert found == ("run-2", f"RuntimeError: {error}")


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize(("level", "passed"), [(logging.WARNING, True), (logging.DEBUG, False)])
def test_what_the_logger_passed_on_before_is_passed_on(level: int, passed: bool) -> None:
    kept = Kept()
    parent = logging.getLogger(SDK_WORKFLOW_LOGGER).parent
    assert parent is not None
    parent.addHandler(kept)
    try:
        reporter = FailureReporter(StatusWriter(None), passed_level=logging.WARNING)
        reporter.handle(record(level, "something %s", "else"))
    finally:
        parent.removeHandler(kept)
    assert bool(kept.records) is passed


def task_failed(cause: WorkflowTaskFailedCause.ValueType, message: str) -> HistoryEvent:
    return HistoryEvent(
        event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
        workflow_task_failed_event_attributes=WorkflowTaskFailedEventAttributes(
            cause=cause, failure=Failure(message=message)
        ),
    )


def test_the_servers_refusals_are_not_the_codes_failures() -> None:
    """A completion refused because events came in while the task ran (UnhandledCommand) and a
    reset are the server's; an exception in the workflow's code is the code's."""
    completed = HistoryEvent(event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
    completed.event_time.FromSeconds(1_800_000_000)
    cause = WorkflowTaskFailedCause
    events = [
        task_failed(cause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE, "before"),
        completed,
        task_failed(cause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND, "UnhandledCommand"),
        task_failed(cause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW, "reset"),
    ]
    assert code_failures(WorkflowHistory("w", events)) == ([], 1_800_000_000)
    code = task_failed(cause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE, "boom")
    assert code_failures(WorkflowHistory("w", [*events, code])) == (["boom"], 1_800_000_000)
