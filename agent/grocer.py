"""The agent's client for the grocer's API, and when to look an order up before placing it.

Every request carries the account's key (GROCER_API_KEY). What an answer means is read from its
status, whatever its body: a 429, a 5xx, a dropped connection or a timeout is
`GrocerUnavailable`: worth retrying (Temporal retries the activity). Any other 4xx (a wrong
path's 404, a wrong key's 401) is `GrocerRefused`: retrying the same request will not help, so
the run fails with the grocer's own reason.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import aiohttp
from pydantic import BaseModel

from agent.data import OrderLine
from infra.config import env_str, grocer_key_ttl_s, parse_choice
from infra.errors import AgentError
from infra.grocer_server import ensure_grocer_url, grocer_api_key
from infra.redaction import redact

TIMEOUT_S = 10.0


class GrocerUnavailable(AgentError):
    """The grocer did not take the request this time (429, 5xx, no answer): try again."""


class GrocerRefused(AgentError):
    """The grocer refused the request (a 4xx other than 429): trying again will not help."""


class OrderNotOurs(AgentError):
    """The grocer holds an order under this run's reference that is not the one this run
    meant to place: confirming it would confirm someone else's order."""


class GrocerOrder(BaseModel):
    id: int
    reference: str
    lines: list[OrderLine]
    created_at: datetime
    # Not in the grocer's body: its `Idempotent-Replayed` header, the order an earlier request
    # with the same key created.
    replayed: bool = False


class GrocerClient:
    def __init__(self, base_url: str, api_key: str, timeout_s: float = TIMEOUT_S) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._auth = {"Authorization": f"Bearer {api_key}"}
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:  # made inside the running event loop, on first use
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> GrocerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def place(self, reference: str, lines: list[OrderLine], key: str | None) -> GrocerOrder:
        headers = {**self._auth, **({"Idempotency-Key": key} if key else {})}
        body = {"reference": reference, "lines": [line.model_dump() for line in lines]}
        data, replayed = await self._call("POST", "/orders", json=body, headers=headers)
        return GrocerOrder.model_validate({**data, "replayed": replayed})

    async def find(self, reference: str) -> list[GrocerOrder]:
        """The orders placed under `reference`, oldest first."""
        data, _ = await self._call(
            "GET", "/orders", params={"reference": reference}, headers=self._auth
        )
        try:
            return [GrocerOrder.model_validate(o) for o in data["orders"]]
        except (KeyError, TypeError, ValueError):
            raise GrocerRefused(
                f"the grocer's answer to GET /orders is not a list of orders: {str(data)[:200]}"
            ) from None

    async def _call(self, method: str, path: str, **kwargs: Any) -> tuple[Any, bool]:
        """The answer's body, and whether the grocer replayed an earlier answer to the key."""
        url = f"{self.base_url}{path}"
        try:
            async with self._http().request(method, url, **kwargs) as response:
                status = response.status
                replayed = response.headers.get("Idempotent-Replayed") == "true"
                text = await response.text(errors="replace")
        except (aiohttp.ClientError, TimeoutError) as err:
            reason = str(err) or type(err).__name__
            raise GrocerUnavailable(
                redact(f"no answer from the grocer at {url}: {reason}")
            ) from None
        try:
            data: Any = json.loads(text)
        except ValueError:
            data = None
        if data is None and status < 300:
            raise GrocerRefused(
                f"the grocer's answer to {method} {path} ({status}) is not JSON: {text[:200]!r}"
            )
        if status < 300:
            return data, replayed
        error = data.get("error", data) if isinstance(data, dict) else (data or text[:200])
        error = redact(str(error))  # a failure is kept in the Temporal history
        if status == 429 or status >= 500:
            raise GrocerUnavailable(f"the grocer answered {status}: {error}")
        raise GrocerRefused(f"the grocer refused {method} {path} ({status}): {error}")


class OrderBackend(StrEnum):
    POSTGRES = "postgres"  # our own orders table (the seed's comparison, like for like)
    GROCER = "grocer"  # the grocer's API: someone else's system, with expiring keys


@dataclass(frozen=True)
class Grocer:
    """Where orders go when ORDER_BACKEND=grocer, and whether to look an order up by its
    reference before placing it (ORDER_EFFECT_CHECK; `off` only for the lab's comparison)."""

    client: GrocerClient
    key_ttl_s: float
    effect_check: bool = True

    async def __aenter__(self) -> Grocer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()


@contextlib.asynccontextmanager
async def configured_grocer() -> AsyncIterator[Grocer | None]:
    """`grocer_from_env()`, its HTTP session closed on leaving."""
    grocer = grocer_from_env()
    try:
        yield grocer
    finally:
        if grocer is not None:
            await grocer.client.close()


def grocer_from_env() -> Grocer | None:
    """The grocer if ORDER_BACKEND=grocer (None: orders go to our own table); every setting
    checked, nothing connected yet."""
    backend = parse_choice(OrderBackend, env_str("ORDER_BACKEND") or "postgres", "order backend")
    if backend is OrderBackend.POSTGRES:
        return None
    check = parse_choice(Switch, env_str("ORDER_EFFECT_CHECK") or "on", "ORDER_EFFECT_CHECK")
    client = GrocerClient(ensure_grocer_url(), grocer_api_key())
    return Grocer(client, grocer_key_ttl_s(), effect_check=check is Switch.ON)


class Switch(StrEnum):
    ON = "on"
    OFF = "off"
