"""Expected failures: each is shown to a person as one readable line, never as a stack trace."""


class AgentError(Exception):
    """Base class for failures a user can cause or fix (bad input, a server that is down)."""


class ConfigError(AgentError):
    """A setting from the command line or the environment is not valid."""


class DatabaseUnavailable(AgentError):
    """Postgres could not be reached."""


class UnknownRun(AgentError):
    """No run with the given id exists."""


def first_line(err: BaseException) -> str:
    """An exception's first line of text, or its type's name when it has none: what a one-line
    error shows of a cause whose message may run to many lines (a driver's, the SDK core's)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


class RunBlocked(AgentError):
    """The run's code no longer replays its history (a deploy): it stays Running, blocked."""
