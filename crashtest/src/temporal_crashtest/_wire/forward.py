"""A gRPC proxy between a worker and the Temporal server that forwards every call untouched.

Every Temporal SDK talks to the server over gRPC, and every call a worker makes is unary (its
long polls too), so one handler serves them all, whatever the service: the request's bytes go
to the server with the caller's metadata and what is left of its deadline, and the server's
answer comes back as it was sent — its bytes, its initial and trailing metadata, or its status
code, message and details (`grpc-status-details-bin`, which the SDKs read: "already started",
"not found" and the like). Nothing is decoded on the way but what a watcher asks to see
(`Watcher`), and a watcher may hold a call, or drop it (the caller's process is being killed:
the server never hears it). A caller that goes away (a poll given up, a worker stopped or
killed) cancels its upstream call too, so no poll is held past its caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

import grpc
import grpc.aio

# Any size both ways: a history or a workflow task's commands may be large, and refusing one is
# the server's business, not the proxy's.
_UNLIMITED = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
# Set by the transport for each call; the rest of the metadata is the caller's (API keys,
# namespaces, client name and version) and goes on as it came.
_TRANSPORT_KEYS = ("content-type", "te", "user-agent", "grpc-accept-encoding", "grpc-encoding")

Metadatum = tuple[str, str | bytes]


class Watcher:
    """Whoever watches the wire: it sees each call before it is forwarded (method, request bytes)
    and may answer False — the call is dropped, never forwarded (its caller is being killed);
    after the server answered, it sees the answer too. Override either step."""

    async def before(self, method: str, request: bytes) -> bool:
        return True

    async def after(self, method: str, request: bytes, response: bytes) -> None:
        return None


def _forwardable(metadata: Iterable[Metadatum] | None) -> tuple[Metadatum, ...]:
    return tuple(
        (key, value)
        for key, value in metadata or ()
        if not key.startswith(":") and key not in _TRANSPORT_KEYS
    )


class WireProxy:
    """Listens on 127.0.0.1 (a free port, or `port`) and forwards to `upstream` (host:port),
    over TLS when `credentials` are given. `start()` returns the address workers should use."""

    def __init__(
        self,
        upstream: str,
        watchers: Sequence[Watcher] = (),
        credentials: grpc.ChannelCredentials | None = None,
        port: int = 0,
    ) -> None:
        self.upstream, self.watchers, self.port = upstream, list(watchers), port
        self.credentials = credentials
        self.calls = 0  # forwarded so far
        self._server: grpc.aio.Server | None = None
        self._channel: grpc.aio.Channel | None = None
        self._methods: dict[str, Any] = {}

    async def start(self) -> str:
        if self.credentials is None:
            self._channel = grpc.aio.insecure_channel(self.upstream, options=_UNLIMITED)
        else:
            self._channel = grpc.aio.secure_channel(
                self.upstream, self.credentials, options=_UNLIMITED
            )
        self._server = grpc.aio.server(options=_UNLIMITED)
        self._server.add_generic_rpc_handlers((_Everything(self),))
        self.port = self._server.add_insecure_port(f"127.0.0.1:{self.port}")
        await self._server.start()
        return self.address

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
        if self._channel is not None:
            await self._channel.close()

    async def forward(
        self, method: str, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> bytes:
        for watcher in self.watchers:
            if not await watcher.before(method, request):
                # As the server answers a task's end it no longer knows: an SDK retries an
                # unavailable server for seconds, holding the worker, but gives this one up.
                await context.abort(grpc.StatusCode.NOT_FOUND, "dropped by the crash test")
        call = self._call(method)(
            request,
            metadata=_forwardable(context.invocation_metadata()),
            timeout=context.time_remaining(),
        )
        try:
            response: bytes = await call
        except grpc.aio.AioRpcError as err:
            await context.abort(
                err.code(), err.details() or "", _forwardable(err.trailing_metadata())
            )
        except asyncio.CancelledError:
            call.cancel()
            raise
        self.calls += 1
        await context.send_initial_metadata(_forwardable(await call.initial_metadata()))
        context.set_trailing_metadata(_forwardable(await call.trailing_metadata()))
        for watcher in self.watchers:
            await watcher.after(method, request, response)
        return response

    def _call(self, method: str) -> Any:
        """The upstream method, bytes in and out (made once per method)."""
        found = self._methods.get(method)
        if found is None:
            assert self._channel is not None, "start() first"
            found = self._methods[method] = self._channel.unary_unary(method)
        return found


class _Everything(grpc.GenericRpcHandler):
    """Any unary method of any service, its bytes passed through undecoded."""

    def __init__(self, proxy: WireProxy) -> None:
        self.proxy = proxy

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method: str = handler_call_details.method

        async def unary(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
            return await self.proxy.forward(method, request, context)

        return grpc.unary_unary_rpc_method_handler(unary)
