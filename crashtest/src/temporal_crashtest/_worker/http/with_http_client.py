"""The standard library's `http.client`: a connection's `request` (the request goes out) and
`getresponse` (its answer came), the layer urllib.request, httplib2 and urllib3 stand on. Between
the two, the request waits on the connection (`_crashtest_send`)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from temporal_crashtest._worker.http.sending import Send, sending

PENDING = "_crashtest_send"  # on a connection: its request's Send, until the answer


def url_of(conn: Any, url: str) -> str:
    """The whole URL a connection's request goes to (`url`: its path, or a proxy's whole URL)."""
    if url.startswith(("http://", "https://")):
        return url
    secure = getattr(conn, "default_port", 80) == 443
    host = getattr(conn, "_tunnel_host", None) or conn.host
    port = getattr(conn, "_tunnel_port", None) or conn.port
    default = 443 if secure else 80
    where = host if port in (None, default) else f"{host}:{port}"
    if ":" in host and not host.startswith("["):  # an IPv6 address
        where = f"[{host}]" if port in (None, default) else f"[{host}]:{port}"
    return f"{'https' if secure else 'http'}://{where}{url if url.startswith('/') else '/' + url}"


def pending(conn: Any, send: Send | None) -> None:
    """The connection's request went out (None: a watched layer above says it)."""
    if send is not None:
        conn.__dict__[PENDING] = send


def install(module: ModuleType) -> None:
    cls = module.HTTPConnection
    request, getresponse = cls.request, cls.getresponse

    def watched_request(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        body = args[0] if args else kwargs.get("body")
        headers = args[1] if len(args) > 1 else kwargs.get("headers")
        with sending("http.client", method, url_of(self, url), headers, body) as send:
            sent = request(self, method, url, *args, **kwargs)
            pending(self, send)
            return sent

    def watched_getresponse(self: Any) -> Any:
        answer = getresponse(self)
        send = self.__dict__.pop(PENDING, None)
        if send is not None:
            send.answered()
        return answer

    cls.request, cls.getresponse = watched_request, watched_getresponse
