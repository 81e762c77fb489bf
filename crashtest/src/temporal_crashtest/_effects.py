"""The effects an activity makes, as the worker sees them: each one a crash point (`effect:N.K`).

`effect(what)` (public: `temporal_crashtest.effect`) says that the running activity has just made
an effect and had it answered — charged a card, sent a message, committed an order. Outside a
crash test it does nothing. In a crash test's worker the crash interceptor has said which
activity attempt runs in the current context (`attempting`), and the call is counted there: the
run without a crash lists each activity's effects, and the worker armed at `effect:N.K` dies at
the K-th, before the activity's next line runs — the window in which "look it up, do it, mark it
done" repeats the effect on the retried attempt.

The current attempt is a context variable: the SDK runs a sync activity in its executor with a
copy of the context, and `asyncio.to_thread` copies it too; a thread the activity starts itself
does not see it (call `effect` from the activity's own thread, or pass the context on).
Standard library only, so that activity code can import it anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token

WHAT_CHARS = 80  # an effect's name as a report shows it, at most

_made: ContextVar[Callable[[str], None] | None] = ContextVar("crashtest_effect", default=None)


def effect(what: str) -> None:
    """Say that the running activity has just made an effect and had it answered: `what` names
    it in the crash test's report ("charged card", "POST /orders"). A no-op outside a crash test.
    """
    made = _made.get()
    if made is not None:
        made(" ".join(str(what).split())[:WHAT_CHARS] or "an effect")


def attempting(made: Callable[[str], None]) -> Token[Callable[[str], None] | None]:
    """The activity attempt running in this context takes each `effect` call (`made(what)`),
    until `done` is given the token returned."""
    return _made.set(made)


def done(token: Token[Callable[[str], None] | None]) -> None:
    _made.reset(token)
