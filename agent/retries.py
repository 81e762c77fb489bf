"""How a failed step is retried, on every engine: which failures another attempt cannot help, and
the schedule of attempts for the rest (a model that did not answer, a grocer answering 503, a
Postgres restarting).

Temporal's activities take it as their retry policy (`workflows.grocery.ACTIVITY_OPTIONS`); the
DBOS steps retry in their own process on the same schedule (`dbos_agent.agent`). Retries are
bounded: 20 attempts are about 80 s of back-to-back failures (0.2 s doubling to 5 s between
them), longer than any outage the chaos lab makes (a Postgres restart takes ~2 s, Temporal's
~5 s) and than a worker kill costs (one attempt); a step failing for longer fails its run with
its last error instead of retrying forever. A model call that was sent and never answered (a
timeout) may have been charged: those have a smaller budget of their own, MODEL_PAID_ATTEMPTS
(`agent.llm`), after which the step fails with `ModelBudgetSpent`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from agent.grocer import GrocerRefused, OrderNotOurs
from agent.guardrails import GuardrailViolation
from agent.model_errors import ModelAnswerRefused, ModelBudgetSpent, ModelOutputError, ModelRefused

# What the steps raise when another attempt cannot help. Temporal's retry policy names them by
# class name (as it matches an application error's type), so a rename cannot skip one.
NOT_RETRIED: tuple[type[Exception], ...] = (
    ModelOutputError,
    ModelAnswerRefused,
    ModelRefused,
    ModelBudgetSpent,
    GuardrailViolation,
    GrocerRefused,
    OrderNotOurs,
)


@dataclass(frozen=True)
class RetrySchedule:
    """Attempts of a step: the first at once, then after `first_wait_s`, growing by `backoff`
    up to `longest_wait_s`, `attempts` in all."""

    first_wait_s: float
    backoff: float
    longest_wait_s: float
    attempts: int

    def waits(self) -> Iterator[float]:
        """The wait before each attempt after the first."""
        wait = self.first_wait_s
        for _ in range(self.attempts - 1):
            yield wait
            wait = min(wait * self.backoff, self.longest_wait_s)


STEP_RETRIES = RetrySchedule(first_wait_s=0.2, backoff=2.0, longest_wait_s=5.0, attempts=20)
