"""aiohttp: `ClientSession._request` (not public; aiohttp 3.x), which every request method goes
through; answered when it returns the response (its headers read)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from temporal_crashtest._worker.http.sending import sending


def _body(kwargs: Mapping[str, Any]) -> bytes | str | None:
    if kwargs.get("json") is not None:
        return json.dumps(kwargs["json"], sort_keys=True)
    data = kwargs.get("data")
    if data is None or isinstance(data, bytes | str):
        return data
    return b"<stream>"


def install(module: ModuleType) -> None:
    session = module.ClientSession
    original = session._request

    async def request(self: Any, method: str, str_or_url: Any, **kwargs: Any) -> Any:
        url = str(str_or_url)
        build = getattr(self, "_build_url", None)
        if callable(build):
            with contextlib.suppress(Exception):
                url = str(build(str_or_url))
        headers = dict(self.headers)
        headers.update(kwargs.get("headers") or {})
        with sending("aiohttp", method, url, headers, _body(kwargs)) as going:
            answer = await original(self, method, str_or_url, **kwargs)
            if going is not None:
                going.answered()
            return answer

    session._request = request
