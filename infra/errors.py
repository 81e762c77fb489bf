"""Expected failures: each is shown to a person as one readable line, never as a stack trace."""


class AgentError(Exception):
    """Base class for failures a user can cause or fix (bad input, a server that is down)."""


class ConfigError(AgentError):
    """A setting from the command line or the environment is not valid."""


class DatabaseUnavailable(AgentError):
    """Postgres could not be reached."""


class UnknownRun(AgentError):
    """No run with the given id exists."""
