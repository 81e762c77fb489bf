"""The grocer's HTTP API (aiohttp)."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from pydantic import ValidationError

from grocer.faults import BadFault, Faults
from grocer.store import KeyReused, OrderRequest, Store

log = logging.getLogger(__name__)
STORE = web.AppKey("store", Store)
FAULTS = web.AppKey("faults", Faults)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def place_order(request: web.Request) -> web.StreamResponse:
    fault = request.app[FAULTS].next()
    if fault.delay_s:
        await asyncio.sleep(fault.delay_s)
    if fault.kind == "error":
        return _error(500, "the store failed (an injected fault)")
    if fault.kind == "refuse":
        return _error(400, "this order is refused (an injected fault)")
    if fault.kind == "rate-limit":
        response = _error(429, "too many requests (an injected fault)")
        response.headers["Retry-After"] = "1"
        return response
    try:
        body = OrderRequest.model_validate_json(await request.read())
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        return _error(422, f"{where}: {first['msg']}")
    key = request.headers.get("Idempotency-Key") or None
    try:
        order, replayed = await request.app[STORE].place(body, key)
    except KeyReused as err:
        return _error(409, str(err))
    log.info("order %d for %s (key %s%s)", order.id, order.reference, key,
             ", replayed" if replayed else "")  # fmt: skip
    if fault.kind == "drop-after-store":  # the order is stored; the client never hears of it
        assert request.transport is not None
        request.transport.abort()
        raise asyncio.CancelledError
    headers = {"Idempotent-Replayed": "true"} if replayed else {}
    return web.json_response(order.model_dump(mode="json"), status=201, headers=headers)


async def find_orders(request: web.Request) -> web.Response:
    reference = request.query.get("reference")
    if not reference:
        return _error(400, "give ?reference=...")
    orders = await request.app[STORE].by_reference(reference)
    return web.json_response({"orders": [o.model_dump(mode="json") for o in orders]})


async def add_faults(request: web.Request) -> web.Response:
    """`{"next": ["slow:1500", "error", "rate-limit", "drop-after-store"]}`: one per coming
    order request, in that order."""
    try:
        body = await request.json()
        request.app[FAULTS].add(list(body["next"]))
    except (ValueError, KeyError, TypeError, BadFault) as err:
        return _error(400, f'expected {{"next": [fault, ...]}}: {err}')
    return web.json_response({"coming": len(request.app[FAULTS].coming)})


async def health(_: web.Request) -> web.Response:
    return web.json_response({"ok": True})


def make_app(store: Store, faults: Faults) -> web.Application:
    app = web.Application()
    app[STORE] = store
    app[FAULTS] = faults
    app.router.add_post("/orders", place_order)
    app.router.add_get("/orders", find_orders)
    app.router.add_post("/_faults", add_faults)
    app.router.add_get("/health", health)
    return app
