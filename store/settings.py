"""Settings shared by the worker and the starter."""

from __future__ import annotations

from store.config import env_str

DEFAULT_TASK_QUEUE = "grocery-agent"


def task_queue() -> str:
    """TASK_QUEUE (default `grocery-agent`): the crash lab gives each cell a queue of its own."""
    return env_str("TASK_QUEUE") or DEFAULT_TASK_QUEUE
