"""The effects an activity makes, as the worker sees them: each one a crash point (`effect:N.K`).

`effect(what)` (public: `temporal_crashtest.effect`) says that the running activity has just made
an effect and had it answered — charged a card, sent a message, committed an order. Outside a
crash test it does nothing. In a crash test's worker the crash interceptor has said which
activity attempt runs in the current context (`attempting`), and the call is counted there: the
run without a crash lists each activity's effects, and the worker armed at `effect:N.K` dies at
the K-th, before the activity's next line runs — the window in which "look it up, do it, mark it
done" repeats the effect on the retried attempt. `unseen(what)` says that the attempt made an
effect no crash point can be made after (an HTTP request sent through a library crashtest does
not watch): the crash test lists it as not tested.

The current attempt is a context variable: the SDK runs a sync activity in its executor with a
copy of the context, and `asyncio.to_thread` copies it too; `loop.run_in_executor`, a
`ThreadPoolExecutor` or a `threading.Thread` the activity starts does not, so in a worker process
each of these is made to run in a copy of the submitting attempt's context (`follow_into_threads`;
only where an attempt is current: every other thread is untouched). A thread a library started
before the activity ran cannot be followed.
Standard library only, so that activity code can import it anywhere.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any, Protocol

WHAT_CHARS = 80  # an effect's name as a report shows it, at most


class Attempt(Protocol):
    """The activity attempt running in a context, as the crash interceptor counts it."""

    def made(self, what: str) -> None: ...

    def unseen(self, what: str) -> None: ...


_attempt: ContextVar[Attempt | None] = ContextVar("crashtest_attempt", default=None)


def _named(what: object, default: str) -> str:
    return " ".join(str(what).split())[:WHAT_CHARS] or default


def effect(what: str) -> None:
    """Say that the running activity has just made an effect and had it answered: `what` names
    it in the crash test's report ("charged card", "POST /orders"). A no-op outside a crash test.
    """
    attempt = _attempt.get()
    if attempt is not None:
        attempt.made(_named(what, "an effect"))


def unseen(what: str) -> None:
    """Say that the running activity made an effect that no crash point follows (a request no
    watched library sent): listed as not tested. A no-op outside a crash test."""
    attempt = _attempt.get()
    if attempt is not None:
        attempt.unseen(_named(what, "an effect"))


def in_an_attempt() -> bool:
    """Whether an activity attempt of a crash test runs in this context."""
    return _attempt.get() is not None


def attempting(attempt: Attempt) -> Token[Attempt | None]:
    """The activity attempt running in this context takes each `effect` call, until `done` is
    given the token returned."""
    return _attempt.set(attempt)


def done(token: Token[Attempt | None]) -> None:
    _attempt.reset(token)


_FOLLOWED = "_crashtest_follows_attempts"


def follow_into_threads() -> None:
    """Work an attempt hands to a thread (`loop.run_in_executor`, any `ThreadPoolExecutor`, a
    `threading.Thread` it starts) runs in a copy of the attempt's context, so that its effects
    are the attempt's. Once per process; where no attempt is current, nothing changes."""
    executor = concurrent.futures.ThreadPoolExecutor
    if getattr(executor, _FOLLOWED, False):
        return
    submit, start = executor.submit, threading.Thread.start

    def submit_in_context(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if _attempt.get() is None:
            return submit(self, fn, *args, **kwargs)
        return submit(self, contextvars.copy_context().run, fn, *args, **kwargs)

    def start_in_context(self: threading.Thread) -> None:
        if _attempt.get() is not None:
            context, run = contextvars.copy_context(), self.run
            self.run = lambda: context.run(run)  # type: ignore[method-assign]
        start(self)

    executor.submit = submit_in_context  # type: ignore[method-assign]
    threading.Thread.start = start_in_context  # type: ignore[method-assign]
    setattr(executor, _FOLLOWED, True)
