"""httpx (and httpx2, the fork openai's client uses): `Client.send` and `AsyncClient.send`, sync
and async, which every request method goes through; answered when `send` returns."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from temporal_crashtest._worker.http.sending import sending


def _body(request: Any) -> bytes | None:
    try:
        return bytes(request.content)
    except Exception:  # a streamed body not read yet: only its presence is known
        return b"<stream>"


def install(module: ModuleType) -> None:
    name = module.__name__
    sync_cls, async_cls = module.Client, module.AsyncClient
    sync_send, async_send = sync_cls.send, async_cls.send

    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        url, raw = str(request.url), request.headers.raw
        with sending(name, request.method, url, raw, _body(request)) as going:
            answer = sync_send(self, request, *args, **kwargs)
            if going is not None:
                going.answered()
            return answer

    async def asend(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        url, raw = str(request.url), request.headers.raw
        with sending(name, request.method, url, raw, _body(request)) as going:
            answer = await async_send(self, request, *args, **kwargs)
            if going is not None:
                going.answered()
            return answer

    sync_cls.send, async_cls.send = send, asend
