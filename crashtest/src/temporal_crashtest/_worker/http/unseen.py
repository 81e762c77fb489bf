"""Requests that no watched library sent, seen on Python's sockets: an HTTP/1 request line with
an effectful method, written by an activity attempt while no watched library sends
(`_http.is_sending`), is unseen — an effect after which no crash point can be made
(`_effects.unseen`), listed as not tested. Sockets are watched where Python writes to them: a
plain socket's `send` and `sendall`, a TLS socket's (before encryption), and asyncio's TLS
(`ssl.SSLObject.write`); anywhere else, only while an attempt runs in the context, with a
look at the first bytes written."""

from __future__ import annotations

import re
import socket
import ssl
from contextvars import ContextVar
from typing import Any

from temporal_crashtest._worker.effects import in_an_attempt, unseen
from temporal_crashtest._worker.http.sending import effectful, is_sending, name_of

_REQUEST_LINE = re.compile(rb"^([A-Z]{3,10}) (\S{1,2048}) HTTP/1\.[01]\r\n")
_HOST = re.compile(rb"\r\nHost:[ \t]*([^\r\n]{1,255})", re.IGNORECASE)
_WATCHED = "_crashtest_unseen"
_LOOKING: ContextVar[bool] = ContextVar("crashtest_unseen_looking", default=False)


def looked_at(data: Any) -> None:
    """What an attempt writes to a socket: an effectful request no watched library sends."""
    if is_sending() or not in_an_attempt():
        return
    try:
        head = bytes(memoryview(data)[:4096])
    except TypeError:
        return
    found = _REQUEST_LINE.match(head)
    if found is None:
        return
    method, target = found.group(1).decode(), found.group(2).decode("latin-1")
    if not effectful(method):
        return
    if not target.startswith(("http://", "https://")):
        host = _HOST.search(head)
        where = host.group(1).decode("latin-1").strip() if host else "an unnamed host"
        target = f"http://{where}{target if target.startswith('/') else '/' + target}"
    unseen(name_of(method, target))


def _watch(cls: type, name: str) -> None:
    original = getattr(cls, name)

    def watched(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        if _LOOKING.get():  # a watched write inside another (a TLS socket's send, unwrapped)
            return original(self, data, *args, **kwargs)
        token = _LOOKING.set(True)
        try:
            looked_at(data)
            return original(self, data, *args, **kwargs)
        finally:
            _LOOKING.reset(token)

    setattr(cls, name, watched)


def install() -> None:
    if getattr(socket.socket, _WATCHED, False):
        return
    for cls, names in (
        (socket.socket, ("send", "sendall")),
        (ssl.SSLSocket, ("send", "write")),  # its sendall sends through send
        (ssl.SSLObject, ("write",)),
    ):
        for name in names:
            _watch(cls, name)
    setattr(socket.socket, _WATCHED, True)
