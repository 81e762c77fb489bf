"""How a model call fails, apart from the step's own checks: the adapters raise these, the
recorded call raises the last two, and the activities name the ones not worth retrying."""

from __future__ import annotations

from infra.errors import AgentError


class ModelUnavailable(AgentError):
    """The model did not answer this time (429, 5xx, no connection, timeout): try again."""


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
