"""The grocer's listening socket, bounded against slow and broken clients.

- **Headers**: a connection must send a whole request head within GROCER_HEADER_TIMEOUT_S of
  opening (or of its last answer, when kept alive); bytes trickled one at a time do not extend
  it. This is aiohttp's keep-alive timer, which runs from the connection's start and is not
  reset by data.
- **Bodies**: a handler reads its body within GROCER_BODY_TIMEOUT_S (`read_body`), else 408.
- **Connections**: at most GROCER_MAX_CONNECTIONS open at once. When one more comes, the oldest
  open connection that has made no request with a valid key and is not serving one is answered
  503 (JSON, `Retry-After`) and closed to make room; if every open connection has proven its key
  (or is busy), the oldest idle connection of the account that holds the most (two or more) is,
  else the newcomer is answered 503 and closed. The agent retries a 503. A request without a
  valid key is answered 401 and its connection closed: clients without a key cannot hold the
  connections real ones need.
- **Per account**: one account holds at most GROCER_MAX_CONNECTIONS_PER_ACCOUNT connections; a
  request of its on one more is answered 503 and that connection closed, so one household (or
  one leaked key) cannot hold every connection and turn every other household away.
- **Broken requests**: what aiohttp's parser refuses (not HTTP, a line too long, a bad header)
  is answered with a JSON error that echoes nothing of the request, and logged as one line; a
  client that hangs up is one line too, never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aiohttp import web

from infra.cli import visible
from infra.config import env_number
from infra.errors import first_line

log = logging.getLogger("grocer.http")


MIN_TIMEOUT_S = 0.1


@dataclass(frozen=True)
class HttpLimits:
    header_timeout_s: float = 10.0
    body_timeout_s: float = 10.0
    max_connections: int = 100
    max_connections_per_account: int = 20

    @classmethod
    def from_env(cls) -> HttpLimits:
        """GROCER_HEADER_TIMEOUT_S, GROCER_BODY_TIMEOUT_S (0.1 to 300: less answers no request
        on a loaded machine), GROCER_MAX_CONNECTIONS and GROCER_MAX_CONNECTIONS_PER_ACCOUNT
        (1-10000); a bad value is one line."""
        defaults = cls()
        return cls(
            header_timeout_s=env_number(
                "GROCER_HEADER_TIMEOUT_S",
                defaults.header_timeout_s,
                minimum=MIN_TIMEOUT_S,
                maximum=300,
            ),
            body_timeout_s=env_number(
                "GROCER_BODY_TIMEOUT_S", defaults.body_timeout_s, minimum=MIN_TIMEOUT_S, maximum=300
            ),
            max_connections=int(
                env_number(
                    "GROCER_MAX_CONNECTIONS", defaults.max_connections, minimum=1, maximum=10_000
                )
            ),
            max_connections_per_account=int(
                env_number(
                    "GROCER_MAX_CONNECTIONS_PER_ACCOUNT",
                    defaults.max_connections_per_account,
                    minimum=1,
                    maximum=10_000,
                )
            ),
        )


LIMITS = web.AppKey("limits", HttpLimits)


async def read_body(request: web.Request) -> bytes:
    """The request's body, read within the app's body timeout (else 408, as JSON by the app's
    error middleware)."""
    try:
        async with asyncio.timeout(request.app[LIMITS].body_timeout_s):
            return await request.read()
    except TimeoutError:
        raise web.HTTPRequestTimeout(reason="the request's body did not arrive in time") from None


class _OneLineLogger(logging.Logger):
    """aiohttp's server logger: what it would log with a traceback (a refused request, a client
    gone mid-answer) is one line of ours, at INFO: the client's doing, not the grocer's."""

    def exception(self, msg: object, *args: object, exc_info: object = True, **_: object) -> None:
        err = exc_info if isinstance(exc_info, BaseException) else None
        reason = f": {type(err).__name__}: {visible(first_line(err))[:200]}" if err else ""
        log.info("%s%s", str(msg) % args if args else msg, reason)


_SERVER_LOG = _OneLineLogger("grocer.http.aiohttp")
_SERVER_LOG.parent = log  # what it logs otherwise goes where the grocer's log goes


def _reason(exc: BaseException) -> str:
    """One line on a refused request: the parser's own message (not its echo of the bytes)."""
    message = getattr(exc, "message", None) or str(exc)
    return f"{type(exc).__name__}: {visible(first_line(Exception(message)))[:200]}"


class _Handler(web.RequestHandler):
    """aiohttp's connection handler, answering what its parser refuses as JSON, and telling
    the listener when its connection is gone; `proven` once a request on it carried a valid
    key."""

    def __init__(
        self, *args: Any, gone: Callable[[_Handler], None], held: Counter[str], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._gone = gone
        self.held = held  # connections proven per account, shared by the listener's handlers
        self.account: str | None = None  # the account whose key a request on it carried

    @property
    def proven(self) -> bool:
        return self.account is not None

    def idle(self) -> bool:
        """Connected and serving no request (aiohttp's own flag; True while one runs)."""
        return self.transport is not None and not getattr(self, "_request_in_progress", True)

    def evictable(self) -> bool:
        """Connected (a burst of connections is made before any is connected: closing one then
        would leave it open for good), neither proven nor serving a request (aiohttp's own flag;
        True while one runs)."""
        return self.idle() and not self.proven

    def evict(self) -> None:
        """Answer 503 and close: its place goes to a newer connection."""
        if self.transport is not None:
            self.transport.write(_Busy.ANSWER)
        self.force_close()

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        if self.account is not None:
            self.held[self.account] -= 1
            self.account = None
        self._gone(self)

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if isinstance(exc, ConnectionError):
            log.info("a client at %s hung up mid-request", request.remote)
        else:
            reason = _reason(exc) if exc is not None else message
            log.info("refused a request from %s (%d): %s", request.remote, status, reason)
        if request.writer.output_size > 0:  # an answer was under way: the connection is broken
            raise ConnectionError("the answer was under way; the connection is closed")
        try:
            what = HTTPStatus(status).phrase.lower()
        except ValueError:
            what = "error"
        if status == 400:
            what = "not a valid HTTP request"
        response = web.json_response({"error": what}, status=status)
        response.force_close()
        return response


class _Busy(asyncio.Protocol):
    """A connection past the bound: answered 503 at once and closed."""

    BODY = b'{"error": "too many connections; try again"}'
    ANSWER = (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
    ) % (len(BODY), BODY)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(self.ANSWER)
        transport.close()


async def listen(runner: web.AppRunner, host: str, port: int, limits: HttpLimits) -> asyncio.Server:
    """Serve the runner's app on host:port within `limits` (its `setup()` done). Close the
    returned server, then clean the runner up, to stop."""
    server = runner.server
    assert server is not None, "runner.setup() first"
    loop = asyncio.get_running_loop()
    # Counted here, not from the server's list: a burst of connections is accepted before any
    # of them is registered there. Oldest first (a dict keeps its insertion order).
    open_now: dict[_Handler, None] = {}
    held: Counter[str] = Counter()
    busy = 0

    def connection() -> asyncio.Protocol:
        nonlocal busy
        if len(open_now) >= limits.max_connections:
            busy += 1
            if busy == 1 or busy % 100 == 0:
                log.warning(
                    "%d connections open, the most allowed: answered 503 (%d so far)",
                    len(open_now),
                    busy,
                )
            oldest = next((h for h in open_now if h.evictable()), None) or _greediest(open_now)
            if oldest is None:
                return _Busy()
            del open_now[oldest]
            oldest.evict()
        handler = _Handler(
            server,
            loop=loop,
            keepalive_timeout=limits.header_timeout_s,
            access_log=None,  # no access log, as AppRunner(access_log=None)
            logger=_SERVER_LOG,
            gone=lambda gone: open_now.pop(gone, None),
            held=held,
        )
        open_now[handler] = None
        return handler

    return await loop.create_server(connection, host, port, reuse_address=True)


def _greediest(open_now: dict[_Handler, None]) -> _Handler | None:
    """The oldest idle connection of the account holding the most connections (two or more),
    to make room for a newcomer when no connection without a key can."""
    counts = Counter(h.account for h in open_now if h.account is not None)
    most = max(counts.values(), default=0)
    if most < 2:
        return None
    greedy = {a for a, n in counts.items() if n == most}
    return next((h for h in open_now if h.account in greedy and h.idle()), None)


def prove(request: web.Request, account: str) -> bool:
    """The request carried `account`'s valid key: its connection is no longer the first to make
    room. False if the account holds as many connections as it may already (this one is to be
    answered 503 and closed)."""
    handler = request.protocol
    if not isinstance(handler, _Handler) or handler.account == account:
        return True
    limit = request.app[LIMITS].max_connections_per_account
    if handler.held[account] >= limit:
        log.warning("account %s holds %d connections, the most allowed: answered 503",
                    visible(account), limit)  # fmt: skip
        return False
    if handler.account is not None:  # another account's key on the same connection
        handler.held[handler.account] -= 1
    handler.account = account
    handler.held[account] += 1
    return True
