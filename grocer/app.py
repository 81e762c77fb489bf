"""The grocer's HTTP API (aiohttp). Every request but `GET /health` carries an account's key;
every error, the client's or the grocer's own, is a JSON body `{"error": ...}`."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable

import psycopg
from aiohttp import web
from psycopg_pool import PoolTimeout
from pydantic import ValidationError

from grocer.accounts import Accounts
from grocer.faults import BadFault, Faults
from grocer.listener import LIMITS, HttpLimits, prove, read_body
from grocer.store import (
    MAX_KEY_CHARS,
    MAX_REFERENCE_CHARS,
    PRINTABLE,
    KeyReused,
    OrderRequest,
    Store,
)

log = logging.getLogger(__name__)
STORE = web.AppKey("store", Store)
FAULTS = web.AppKey("faults", Faults)
ACCOUNTS = web.AppKey("accounts", Accounts)
ACCOUNT = "account"  # the request's account, set by `_authenticate`
_KEY = re.compile(rf"[\x20-\x7e]{{1,{MAX_KEY_CHARS}}}")  # printable ASCII
_REFERENCE = re.compile(PRINTABLE)
DATABASE_DOWN = "its database does not answer"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own errors (404, 405, 413, ...) and anything unexpected, as JSON."""
    try:
        return await handler(request)
    except web.HTTPException as err:
        if err.status < 400:
            raise
        return _error(err.status, err.reason)
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except (psycopg.OperationalError, PoolTimeout) as err:
        log.warning(
            "%s %s: the database does not answer: %s",
            request.method,
            request.path,
            type(err).__name__,
        )
        return _error(503, DATABASE_DOWN)
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        return _error(500, "the grocer failed")


@web.middleware
async def _authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path == "/health":
        return await handler(request)
    account = request.app[ACCOUNTS].account_for(request.headers.get("Authorization"))
    if account is None:
        response = _error(401, "missing or wrong API key (Authorization: Bearer KEY)")
        response.headers["WWW-Authenticate"] = "Bearer"
        response.force_close()  # a client without a key holds no connection
        return response
    if not prove(request, account):
        response = _error(503, "this account holds as many connections as it may; try again")
        response.headers["Retry-After"] = "1"
        response.force_close()
        return response
    request[ACCOUNT] = account
    return await handler(request)


async def place_order(request: web.Request) -> web.StreamResponse:
    faults = request.app.get(FAULTS)
    fault = faults.next() if faults is not None else None
    if fault is not None and fault.delay_s:
        await asyncio.sleep(fault.delay_s)
    if fault is not None and fault.kind == "error":
        return _error(500, "the store failed (an injected fault)")
    if fault is not None and fault.kind == "refuse":
        return _error(400, "this order is refused (an injected fault)")
    if fault is not None and fault.kind == "rate-limit":
        response = _error(429, "too many requests (an injected fault)")
        response.headers["Retry-After"] = "1"
        return response
    key = request.headers.get("Idempotency-Key")
    if key is not None and not _KEY.fullmatch(key):
        return _error(400, f"Idempotency-Key: 1 to {MAX_KEY_CHARS} printable ASCII characters")
    try:
        body = OrderRequest.model_validate_json(await read_body(request))
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        return _error(422, f"{where}: {first['msg']}")
    try:
        order, replayed = await request.app[STORE].place(request[ACCOUNT], body, key)
    except KeyReused as err:
        return _error(409, str(err))
    log.info(
        "order %d for %s (account %s%s)",
        order.id,
        order.reference,
        request[ACCOUNT],
        ", replayed" if replayed else "",
    )
    if fault is not None and fault.kind == "drop-after-store":  # stored; the client never hears
        assert request.transport is not None
        request.transport.abort()
        raise asyncio.CancelledError
    headers = {"Idempotent-Replayed": "true"} if replayed else {}
    return web.json_response(order.model_dump(mode="json"), status=201, headers=headers)


async def find_orders(request: web.Request) -> web.Response:
    reference = request.query.get("reference")
    if not reference or len(reference) > MAX_REFERENCE_CHARS or not _REFERENCE.fullmatch(reference):
        return _error(400, f"give ?reference=R (1 to {MAX_REFERENCE_CHARS} printable characters)")
    orders = await request.app[STORE].by_reference(request[ACCOUNT], reference)
    return web.json_response({"orders": [o.model_dump(mode="json") for o in orders]})


async def add_faults(request: web.Request) -> web.Response:
    """`{"next": ["slow:1500", "error", "rate-limit", "drop-after-store"]}`: one per coming
    order request, in that order (test mode only)."""
    try:
        body = json.loads(await read_body(request))
        request.app[FAULTS].add(list(body["next"]))
    except (ValueError, KeyError, TypeError, BadFault) as err:
        return _error(400, f'expected {{"next": [fault, ...]}}: {err}')
    return web.json_response({"coming": len(request.app[FAULTS].coming)})


async def clear_faults(request: web.Request) -> web.Response:
    request.app[FAULTS].clear()
    return web.json_response({"coming": 0})


async def health(request: web.Request) -> web.Response:
    if await request.app[STORE].healthy():
        return web.json_response({"ok": True})
    return web.json_response({"ok": False, "error": DATABASE_DOWN}, status=503)


def make_app(
    store: Store, accounts: Accounts, faults: Faults | None = None, limits: HttpLimits | None = None
) -> web.Application:
    """The grocer; `faults` only in test mode (without them there is no `/_faults`)."""
    app = web.Application(middlewares=[_json_errors, _authenticate], client_max_size=64 * 1024)
    app[LIMITS] = limits or HttpLimits()
    app[STORE] = store
    app[ACCOUNTS] = accounts
    app.router.add_post("/orders", place_order)
    app.router.add_get("/orders", find_orders)
    app.router.add_get("/health", health)
    if faults is not None:
        app[FAULTS] = faults
        app.router.add_post("/_faults", add_faults)
        app.router.add_delete("/_faults", clear_faults)
    return app
