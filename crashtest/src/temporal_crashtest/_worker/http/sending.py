"""A request going out through a watched library (`sending`): the listeners told, and its name
as an effect, said once its answer came (`Send.answered`); and whether a watched library sends in
this context now (`is_sending`: a layer below says nothing of its own, and what its sockets carry
is not unseen)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from temporal_crashtest._worker.effects import effect
from temporal_crashtest._worker.http.urls import target_of

UNEFFECTFUL = frozenset({"GET", "HEAD", "OPTIONS"})
Listener = Callable[[str, str, str, Any, Any], None]  # (library, method, url, headers, body)
_listeners: list[Listener] = []
# Set while a watched library sends a request: a layer below it says nothing of its own, and
# what its sockets carry is not unseen.
_SENDING: ContextVar[bool] = ContextVar("crashtest_http_sending", default=False)


def listen(listener: Listener) -> None:
    """`listener(library, method, url, headers, body)` is told of each request before it goes."""
    if listener not in _listeners:
        _listeners.append(listener)


def effectful(method: str) -> bool:
    return method.upper() not in UNEFFECTFUL


def name_of(method: str, url: str) -> str:
    """A request as a report names it: `POST api.stripe.com/v1/charges` (masked)."""
    return f"{method.upper()} {target_of(url)}"


class Send:
    """A request going out through a watched library: its name as an effect (None: not an
    effect), to be said once it is answered (`answered`)."""

    def __init__(self, said: str | None) -> None:
        self.said = said

    def answered(self) -> None:
        if self.said is not None:
            effect(self.said)
            self.said = None  # said once, however many layers report the answer


@contextmanager
def sending(library: str, method: str, url: str, headers: Any, body: Any) -> Iterator[Send | None]:
    """Around a library's send: the listeners told, and the `Send` whose answer is an effect;
    None where a watched library below which this one sends already said it."""
    if _SENDING.get():
        yield None
        return
    token = _SENDING.set(True)
    try:
        yield _told(library, method, url, headers, body)
    finally:
        _SENDING.reset(token)


def _told(library: str, method: str, url: str, headers: Any, body: Any) -> Send:
    """The listeners told of a request, and its `Send`. Nothing here may fail the request: what
    cannot be read of it is said once, on the worker's output, and the request goes on."""
    said = None
    try:
        said = name_of(str(method), str(url)) if effectful(str(method)) else None
        for listener in _listeners:
            listener(library, method, url, headers, body)
    except Exception as err:
        if library not in _failed:
            _failed.add(library)
            print(
                f"crashtest: a request through {library} could not be read ({type(err).__name__}:"
                f" {err}); the request goes on",
                file=sys.stderr,
                flush=True,
            )
    return Send(said)


_failed: set[str] = set()  # the libraries whose request could not be read, said once each


def is_sending() -> bool:
    """Whether a watched library sends a request in this context now."""
    return _SENDING.get()
