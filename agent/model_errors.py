"""How a model call fails, apart from the step's own checks: the adapters raise these, the
recorded call raises the last two, and the activities name the ones not worth retrying."""

from __future__ import annotations

from infra.errors import AgentError


class ModelUnavailable(AgentError):
    """The model did not answer this time (429, 5xx, no connection, timeout): try again."""


class ModelNoAnswer(ModelUnavailable):
    """The request reached the model and no answer came back (a timeout while it was thinking,
    a connection dropped after the request was sent): the provider may have charged for it.
    Retried, within the step's budget of paid attempts (MODEL_PAID_ATTEMPTS)."""


class ModelBudgetSpent(AgentError):
    """A step's calls went unanswered on as many paid attempts as MODEL_PAID_ATTEMPTS allows:
    asking again would pay again for what may never answer in time. The step fails."""


class ModelRefused(AgentError):
    """The model's provider refused the request (a 4xx other than 429): retrying will not help."""


class ModelOutputError(AgentError):
    """The model answered, but not with the JSON the step asked for. Retrying will not help."""


class ModelAnswerRefused(AgentError):
    """The model answered with something we cannot keep: over the size cap, or what Postgres's
    `jsonb` refuses (a NUL, a lone surrogate, a non-finite number). Asking again would pay again
    for an answer refused again, so the step fails after one paid call."""


class AnswerTooLarge(AgentError):
    """The model's answer grew past the size cap while it was being read: it was not read to its
    end (nor held in memory), and is refused like any answer we cannot keep."""
